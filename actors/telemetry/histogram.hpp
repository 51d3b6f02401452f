#pragma once

/// @file histogram.hpp
/// A latency histogram with fixed exponential buckets in microseconds:
/// upper bounds 1, 2, 4, … 2^26 µs (about 67 s), then +Inf. Fixed buckets
/// keep observation O(1) and allocation-free, and make every castellan
/// histogram comparable with every other. No CAF.

#include <array>
#include <cstddef>
#include <cstdint>

namespace castellan {

class histogram {
public:
  /// Finite buckets; index `bucket_count` is the +Inf bucket.
  static constexpr size_t bucket_count = 27;

  /// Upper bound of finite bucket `i`, in µs (2^i).
  static constexpr uint64_t bound_us(size_t i) { return uint64_t{1} << i; }

  /// Counts one observation of `us` microseconds.
  void observe(uint64_t us) noexcept;

  /// Adds `other`'s observations (to aggregate series, e.g. over pools).
  void merge(const histogram& other) noexcept;

  uint64_t count() const noexcept { return count_; }
  uint64_t sum_us() const noexcept { return sum_us_; }

  /// Observations ≤ bound_us(i) (i < bucket_count), or all of them (i == bucket_count).
  uint64_t cumulative(size_t i) const noexcept;

  /// An upper estimate of the q-quantile (0 < q ≤ 1) in µs: the bound of the
  /// bucket that holds it. 0 without observations; for the +Inf bucket, the
  /// largest value observed.
  uint64_t quantile_us(double q) const noexcept;

private:
  std::array<uint64_t, bucket_count + 1> buckets_{}; ///< not cumulative
  uint64_t count_ = 0;
  uint64_t sum_us_ = 0;
  uint64_t max_us_ = 0;
};

} // namespace castellan
