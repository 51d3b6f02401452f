#pragma once

/// @file config_error.hpp
/// What is wrong with a daemon config, precisely enough to fix it: the file,
/// the line and column, the key path (`pools[1].limits.memory`), the value as
/// written and what is wrong with it. The loader reports every one it finds.

#include <cstdint>
#include <string>

namespace castellan::config {

/// One problem (or warning) in one config file.
struct config_error {
  std::string file;    ///< the config file as named ("<built-in>" for the built-in default)
  uint32_t line = 0;   ///< 1-based; 0 when the problem has no place in the file
  uint32_t column = 0; ///< 1-based; 0 when unknown
  std::string key;     ///< the key path ("pools[1].limits.memory"); empty: the file itself
  std::string value;   ///< the value as TOML, shortened when long; empty: none (a missing key)
  std::string message; ///< what is wrong

  /// "file:line:column: key: value: message", leaving out what is unknown.
  std::string describe() const;
};

} // namespace castellan::config
