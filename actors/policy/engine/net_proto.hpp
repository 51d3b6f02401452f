#pragma once

/// @file net_proto.hpp
/// The transport protocols net rules distinguish.

#include <cstdint>
#include <optional>
#include <string_view>

namespace castellan::policy {

enum class net_proto : uint8_t { tcp, udp };

/// "tcp" or "udp".
constexpr std::string_view to_string(net_proto x) noexcept {
  return x == net_proto::tcp ? "tcp" : "udp";
}

/// Parses "tcp" or "udp".
constexpr std::optional<net_proto> parse_net_proto(std::string_view text) noexcept {
  if (text == "tcp")
    return net_proto::tcp;
  if (text == "udp")
    return net_proto::udp;
  return std::nullopt;
}

} // namespace castellan::policy
