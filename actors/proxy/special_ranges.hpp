#pragma once

/// @file special_ranges.hpp
/// Address blocks that never reach the internet and often reach something
/// valuable instead: the host itself (loopback), the cloud metadata service
/// (169.254.169.254, link-local), the operator's private networks (RFC 1918,
/// shared address space, IPv6 ULA, site-local and link-local), multicast,
/// the unspecified addresses, and the IPv6 ranges that carry an IPv4 address
/// inside them (IPv4-compatible, IPv4-translated, NAT64, 6to4, Teredo),
/// through which an IPv4 destination the IPv4 rules refuse could otherwise
/// be reached. The egress proxy denies a connection to any of them unless a
/// net rule allows that block explicitly (see destination_check.hpp),
/// whatever the host lists and defaults say; for the embedding ranges the
/// embedded IPv4 address must then pass the IPv4 rules as well.

#include <string_view>
#include <vector>

#include "actors/policy/engine/ip.hpp"

namespace castellan::proxy {

/// Where an IPv6 range carries an IPv4 address.
enum class ipv4_embedding : uint8_t {
  none,
  last_32_bits,  ///< bytes 12..15 (IPv4-compatible, IPv4-translated, NAT64 64:ff9b::/96)
  six_to_four,   ///< bytes 2..5 (2002:AABB:CCDD::/48)
  teredo,        ///< server at bytes 4..7, client at bytes 12..15 inverted (RFC 4380)
  variable,      ///< the position depends on a prefix length only the operator knows
                 ///< (local-use NAT64 64:ff9b:1::/48, RFC 6052): refused, not decoded
};

struct special_range {
  policy::cidr_block block;
  std::string_view name; ///< "loopback (127.0.0.0/8)", …
  ipv4_embedding embeds = ipv4_embedding::none;
};

/// The special range `addr` lies in (the most specific one), or nullptr. An
/// IPv4-mapped address (::ffff:a.b.c.d) must have been turned into IPv4
/// first (policy::parse_ip does, destination_check does): as IPv6 it is
/// reported as a range of its own, refused unless explicitly allowed, which
/// a net rule cannot do (the parser turns mapped rules into IPv4 rules).
const special_range* special_range_of(const policy::ip_address& addr) noexcept;

/// The IPv4 addresses `addr` carries: those of its embedding range, and of
/// an ISATAP interface identifier (…:0:5efe:a.b.c.d or …:200:5efe:a.b.c.d,
/// RFC 5214) in any prefix. Empty for IPv4 and for the `variable` ranges.
std::vector<policy::ip_address> embedded_ipv4(const policy::ip_address& addr);

/// ::ffff:a.b.c.d as a.b.c.d; any other address unchanged.
policy::ip_address unmap_ipv4(const policy::ip_address& addr) noexcept;

} // namespace castellan::proxy
