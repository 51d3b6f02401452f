#pragma once

/// @file prometheus_exposition.hpp
/// The Prometheus text exposition format, version 0.0.4: `# HELP` and
/// `# TYPE` lines, one sample per line, histograms as cumulative `_bucket`
/// series with `le` plus `_sum` and `_count`. Histograms are observed in µs
/// and exposed in seconds (Prometheus's base unit), printed exactly. No CAF.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/telemetry/metrics_registry.hpp"

namespace castellan {

/// The Content-Type an HTTP endpoint serves the text with.
inline constexpr std::string_view prometheus_content_type = "text/plain; version=0.0.4";

/// The whole registry in exposition format, families by name, series by
/// labels, ending in a newline.
std::string to_prometheus_text(const metrics_registry& reg);

/// A label value escaped for the format (backslash, double quote, newline),
/// with invalid UTF-8 replaced by U+FFFD.
std::string escape_label_value(std::string_view value);

/// A HELP text escaped for the format (backslash, newline).
std::string escape_help(std::string_view help);

/// A sample value: integers exactly, others with 17 significant digits,
/// "+Inf", "-Inf", "NaN".
std::string format_sample_value(double v);

/// `us` microseconds as exact decimal seconds ("0.000001", "67.108864", "3").
std::string format_us_as_seconds(uint64_t us);

} // namespace castellan
