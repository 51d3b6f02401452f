#pragma once

/// @file rate_meter.hpp
/// Events per second over the last ten seconds, for the human summary
/// (Prometheus computes its own rates from the counters). O(1), no
/// allocation. No CAF.

#include <array>
#include <cstdint>

namespace castellan {

class rate_meter {
public:
  static constexpr int64_t window_s = 10;

  /// Counts `n` events at `now_ms` (a monotonic clock in milliseconds).
  void add(uint64_t n, int64_t now_ms) noexcept {
    const int64_t sec = now_ms / 1000;
    auto& slot = slots_[static_cast<size_t>(sec % window_s)];
    if (slot.second != sec)
      slot = {0, sec};
    slot.count += n;
    if (first_ms_ < 0)
      first_ms_ = now_ms;
  }

  /// Events per second over the window, or since the first event if that is
  /// more recent (at least one second, so a burst is not inflated).
  double per_second(int64_t now_ms) const noexcept {
    if (first_ms_ < 0)
      return 0.0;
    const int64_t sec = now_ms / 1000;
    uint64_t total = 0;
    for (const auto& s : slots_)
      if (s.second > sec - window_s && s.second <= sec)
        total += s.count;
    double span = static_cast<double>(now_ms - first_ms_) / 1000.0;
    if (span > static_cast<double>(window_s))
      span = static_cast<double>(window_s);
    if (span < 1.0)
      span = 1.0;
    return static_cast<double>(total) / span;
  }

private:
  struct slot_t {
    uint64_t count = 0;
    int64_t second = -1;
  };
  std::array<slot_t, window_s> slots_{};
  int64_t first_ms_ = -1;
};

} // namespace castellan
