/// @file special_ranges.cpp
/// The table of special-purpose blocks (IANA special-purpose registries,
/// the blocks that matter for egress).

#include "actors/proxy/special_ranges.hpp"

#include <array>

namespace castellan::proxy {

namespace {

using policy::cidr_block;
using policy::ip_address;
using policy::ip_family;

cidr_block v4(uint8_t a, uint8_t b, uint8_t c, uint8_t d, uint8_t prefix) {
  cidr_block x;
  x.network.family = ip_family::v4;
  x.network.bytes = {a, b, c, d};
  x.prefix = prefix;
  return x;
}

cidr_block v6(uint8_t b0, uint8_t b1, uint8_t last, uint8_t prefix) {
  cidr_block x;
  x.network.family = ip_family::v6;
  x.network.bytes[0] = b0;
  x.network.bytes[1] = b1;
  x.network.bytes[15] = last;
  x.prefix = prefix;
  return x;
}

struct range_table {
  std::array<special_range, 16> ranges;
  range_table()
    : ranges{{
        {v4(0, 0, 0, 0, 8), "this network (0.0.0.0/8)"},
        {v4(10, 0, 0, 0, 8), "private (RFC 1918, 10.0.0.0/8)"},
        {v4(100, 64, 0, 0, 10), "shared address space (100.64.0.0/10)"},
        {v4(127, 0, 0, 0, 8), "loopback (127.0.0.0/8)"},
        {v4(169, 254, 0, 0, 16), "link-local incl. cloud metadata (169.254.0.0/16)"},
        {v4(172, 16, 0, 0, 12), "private (RFC 1918, 172.16.0.0/12)"},
        {v4(192, 168, 0, 0, 16), "private (RFC 1918, 192.168.0.0/16)"},
        {v4(224, 0, 0, 0, 4), "multicast (224.0.0.0/4)"},
        {v4(240, 0, 0, 0, 4), "reserved (240.0.0.0/4)"},
        {v6(0, 0, 0, 128), "unspecified (::)"},
        {v6(0, 0, 1, 128), "loopback (::1)"},
        {v6(0xfe, 0x80, 0, 10), "link-local (fe80::/10)"},
        {v6(0xfc, 0x00, 0, 7), "unique local (fc00::/7)"},
        {v6(0xff, 0x00, 0, 8), "multicast (ff00::/8)"},
        // NAT64 and 6to4 embed an IPv4 address the rules above would not see.
        {v6(0x00, 0x64, 0, 16), "NAT64 (64:ff9b::/96 and 64::/16)"},
        {v6(0x20, 0x02, 0, 16), "6to4 (2002::/16)"},
      }} {}
};

} // namespace

const special_range* special_range_of(const ip_address& addr) noexcept {
  static const range_table table; // immutable after construction
  for (const auto& r : table.ranges)
    if (r.block.network.family == addr.family && r.block.contains(addr))
      return &r;
  return nullptr;
}

} // namespace castellan::proxy
