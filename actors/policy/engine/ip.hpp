#pragma once

/// @file ip.hpp
/// IPv4/IPv6 addresses and CIDR blocks for net rules.
///
/// An IPv4-mapped IPv6 address (::ffff:a.b.c.d) is the IPv4 address a.b.c.d:
/// both queries and rules are normalised that way, so the IPv4 rules also
/// decide connections made through an AF_INET6 socket to a mapped address.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan::policy {

enum class ip_family : uint8_t { v4, v6 };

/// An address in network byte order; an IPv4 address uses bytes[0..3].
struct ip_address {
  ip_family family = ip_family::v4;
  std::array<uint8_t, 16> bytes{};

  /// 4 or 16.
  unsigned size() const noexcept { return family == ip_family::v4 ? 4u : 16u; }
  /// 32 or 128.
  unsigned bits() const noexcept { return size() * 8u; }

  friend bool operator==(const ip_address& a, const ip_address& b) noexcept {
    return a.family == b.family && a.bytes == b.bytes;
  }
};

/// Parses a dotted-quad IPv4 or an RFC 4291 IPv6 address (no zone id);
/// mapped IPv6 addresses become IPv4.
std::optional<ip_address> parse_ip(std::string_view text) noexcept;

/// An IPv4 address from its host-order integer (10.0.0.1 == 0x0a000001).
ip_address make_ipv4(uint32_t host_order) noexcept;

/// The textual form ("10.0.0.1", "2001:db8::1").
std::string to_string(const ip_address& x);

/// A block of addresses: `network` with all bits after `prefix` zero.
struct cidr_block {
  ip_address network;
  uint8_t prefix = 0;

  /// True when `addr` (normalised, see parse_ip) lies in the block.
  bool contains(const ip_address& addr) const noexcept;
};

/// Parses "a.b.c.d/n" (0..32), "v6/n" (0..128) or a bare address (a single
/// host). Bits set beyond the prefix are an error (the message names the
/// network that was probably meant), never silently cleared. A block inside
/// ::ffff:0:0/96 becomes the equivalent IPv4 block.
outcome<cidr_block> parse_cidr(std::string_view text);

/// The canonical form ("10.0.0.0/8").
std::string to_string(const cidr_block& x);

/// `addr` with every bit from `prefix` on cleared.
ip_address mask_address(const ip_address& addr, unsigned prefix) noexcept;

} // namespace castellan::policy
