#pragma once

/// @file metrics_registry.hpp
/// castellan's metrics: named families of counters, gauges and histograms,
/// each holding one series per label set. Names and labels are validated
/// when they enter, so the exposition can never be invalid, and each family
/// has a series cap, so hostile or buggy labels cannot grow memory without
/// bound. Owned by the telemetry actor; no CAF, no locking.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "actors/telemetry/histogram.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

using metric_labels = std::map<std::string, std::string>;

enum class metric_type : uint8_t { counter, gauge, histogram };

/// "counter", "gauge", "histogram" (the exposition's TYPE words).
std::string_view type_name(metric_type x);

/// One metric: its metadata and its series.
struct metric_family {
  std::string name;
  metric_type type = metric_type::counter;
  std::string help;
  std::map<metric_labels, double> values;        ///< counters and gauges
  std::map<metric_labels, histogram> histograms; ///< histograms (in µs)
  size_t series() const { return values.size() + histograms.size(); }
};

/// True for a valid metric name: [a-zA-Z_:][a-zA-Z0-9_:]*.
bool valid_metric_name(std::string_view name);
/// True for a valid label name: [a-zA-Z_][a-zA-Z0-9_]*, not starting with "__".
bool valid_label_name(std::string_view name);

class metrics_registry {
public:
  explicit metrics_registry(size_t max_series_per_family = 1000);

  /// Declares a family. Counter names must end in `_total`, histogram names
  /// in `_seconds` (they are exposed in seconds, observed in µs); re-declaring
  /// with the same type is a no-op.
  outcome<void> declare(const std::string& name, metric_type type, std::string help);

  /// Adds `delta` (≥ 0) to a counter. False if refused (unknown family,
  /// wrong type, invalid labels, series cap); refusals are counted.
  bool add(const std::string& name, const metric_labels& labels, double delta);
  /// Sets a gauge, or a counter whose total is kept elsewhere (a cgroup's
  /// CPU time).
  bool set(const std::string& name, const metric_labels& labels, double value);
  /// Observes `us` microseconds in a histogram.
  bool observe_us(const std::string& name, const metric_labels& labels, uint64_t us);

  /// Removes the series of family `name` whose labels satisfy `pred`.
  size_t remove_if(const std::string& name, const std::function<bool(const metric_labels&)>& pred);

  /// A counter's or gauge's value.
  std::optional<double> value(const std::string& name, const metric_labels& labels) const;
  /// A histogram series, or null.
  const histogram* find_histogram(const std::string& name, const metric_labels& labels) const;
  /// A family, or null.
  const metric_family* find(const std::string& name) const;

  /// Every family, by name.
  const std::map<std::string, metric_family>& families() const noexcept { return families_; }

  /// Updates refused so far (they also appear as castellan_telemetry_refused_total).
  uint64_t refused() const noexcept { return refused_; }

private:
  metric_family* family_for(const std::string& name, metric_type type, const metric_labels& labels,
                            bool creates_series);
  void refuse();

  size_t max_series_;
  std::map<std::string, metric_family> families_;
  uint64_t refused_ = 0;
};

} // namespace castellan
