#include "actors/telemetry/histogram.hpp"

#include <algorithm>
#include <cmath>

namespace castellan {

void histogram::observe(uint64_t us) noexcept {
  size_t i = 0;
  while (i < bucket_count && us > bound_us(i))
    ++i;
  ++buckets_[i];
  ++count_;
  sum_us_ += us;
  max_us_ = std::max(max_us_, us);
}

void histogram::merge(const histogram& other) noexcept {
  for (size_t i = 0; i <= bucket_count; ++i)
    buckets_[i] += other.buckets_[i];
  count_ += other.count_;
  sum_us_ += other.sum_us_;
  max_us_ = std::max(max_us_, other.max_us_);
}

uint64_t histogram::cumulative(size_t i) const noexcept {
  uint64_t total = 0;
  for (size_t k = 0; k <= std::min(i, bucket_count); ++k)
    total += buckets_[k];
  return total;
}

uint64_t histogram::quantile_us(double q) const noexcept {
  if (count_ == 0)
    return 0;
  const auto rank = std::max<uint64_t>(
      1, static_cast<uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_))));
  uint64_t seen = 0;
  for (size_t i = 0; i < bucket_count; ++i) {
    seen += buckets_[i];
    if (seen >= rank)
      return bound_us(i);
  }
  return max_us_;
}

} // namespace castellan
