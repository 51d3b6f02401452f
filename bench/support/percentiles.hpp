#pragma once

/// @file percentiles.hpp
/// Latency samples and their percentiles, for the benchmarks.

#include <algorithm>
#include <cstddef>
#include <vector>

namespace castellan::bench {

class samples {
public:
  void add(double v) { values_.push_back(v); }
  std::size_t size() const { return values_.size(); }
  void merge(const samples& other) {
    values_.insert(values_.end(), other.values_.begin(), other.values_.end());
  }

  /// The p-quantile (0 ≤ p ≤ 1) by the nearest-rank method.
  double percentile(double p) {
    if (values_.empty())
      return 0;
    std::sort(values_.begin(), values_.end());
    auto rank = static_cast<std::size_t>(p * static_cast<double>(values_.size()));
    return values_[std::min(rank, values_.size() - 1)];
  }

private:
  std::vector<double> values_;
};

} // namespace castellan::bench
