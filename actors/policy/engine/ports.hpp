#pragma once

/// @file ports.hpp
/// Port specifications of net rules: "80", "80,443", "8000-9000", mixed.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::policy {

/// An inclusive range of ports, `from <= to`.
struct port_range {
  uint16_t from = 0;
  uint16_t to = 0;

  bool contains(uint16_t port) const noexcept { return from <= port && port <= to; }
  friend bool operator==(const port_range& a, const port_range& b) noexcept {
    return a.from == b.from && a.to == b.to;
  }
};

/// Parses a comma-separated list of ports and ranges. Each port is decimal,
/// 0..65535, without sign, space or leading zero; a range is "from-to" with
/// from <= to. Returns the ranges in their written order.
outcome<std::vector<port_range>> parse_port_spec(std::string_view text);

/// True when any range contains `port`.
bool ports_contain(const std::vector<port_range>& ranges, uint16_t port) noexcept;

} // namespace castellan::policy
