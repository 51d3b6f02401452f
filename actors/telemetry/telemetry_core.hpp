#pragma once

/// @file telemetry_core.hpp
/// What the telemetry actor knows, without the actor: castellan's metric
/// catalogue (names, types, help; docs/metrics.md), how each observation
/// updates it, the Prometheus exposition and the human summary. No CAF
/// runtime, so it is tested directly and the actor stays a thin shell.

#include <cstdint>
#include <string>

#include "actors/telemetry/metric_names.hpp"
#include "actors/telemetry/metrics_registry.hpp"
#include "actors/telemetry/rate_meter.hpp"
#include "actors/telemetry/telemetry_messages.hpp"

namespace castellan {

class telemetry_core {
public:
  /// `max_series_per_family` bounds each metric's label sets.
  explicit telemetry_core(size_t max_series_per_family = 1000);

  void apply(const exec_observation& x, int64_t now_ms);
  void apply(const pool_status& x);
  void apply(const worker_usage& x);
  void apply(const worker_retired& x);
  /// False if refused (unknown or invalid name, invalid labels, series cap).
  /// Undeclared names ending in `_total` become counters on first use.
  bool apply(const counter_increment& x);
  void apply(const mediated_syscall& x, int64_t now_ms);
  void apply(const ring_fill& x);

  /// The Prometheus text exposition (format 0.0.4).
  std::string exposition() const;

  /// A few lines for humans: execs by class and rate, latency quantiles,
  /// pools, worker churn, mediated syscalls per second, audit.
  std::string summary(int64_t now_ms) const;

  /// The summary's figures as numbers (the text is made from them).
  telemetry_summary summarize(int64_t now_ms) const;

  const metrics_registry& registry() const noexcept { return reg_; }

private:
  metrics_registry reg_;
  rate_meter execs_rate_;
  rate_meter syscalls_rate_;
};

} // namespace castellan
