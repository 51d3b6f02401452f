#pragma once

/// @file exposition_validator.hpp
/// A strict parser of the Prometheus text exposition format 0.0.4 for the
/// tests: it refuses anything a scraper could misread (bad names, escapes,
/// duplicate series, HELP/TYPE out of place, non-cumulative or incomplete
/// histograms) and gives the parsed samples back so that tests can compare
/// figures with what they observed.

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace castellan::test {

using label_map = std::map<std::string, std::string>;

struct parsed_sample {
  std::string name; ///< as written (with _bucket, _sum, _count)
  label_map labels;
  double value = 0;
};

struct parsed_family {
  std::string type; ///< counter, gauge, histogram, summary, untyped
  std::string help;
  std::vector<parsed_sample> samples;
};

struct parsed_exposition {
  std::map<std::string, parsed_family> families;
  std::vector<std::string> errors; ///< empty: valid

  bool valid() const { return errors.empty(); }
  /// The value of sample `name` with exactly `labels`, if present.
  std::optional<double> value(const std::string& name, const label_map& labels = {}) const;
};

parsed_exposition parse_exposition(const std::string& text);

} // namespace castellan::test
