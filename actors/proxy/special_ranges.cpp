/// @file special_ranges.cpp
/// The table of special-purpose blocks (IANA special-purpose registries,
/// the blocks that matter for egress).

#include "actors/proxy/special_ranges.hpp"

#include <algorithm>
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

/// An IPv6 block from its first eight 16-bit groups' leading ones (the rest
/// zero), with `last` as the final byte (for ::1).
cidr_block v6(std::initializer_list<uint16_t> groups, uint8_t prefix, uint8_t last = 0) {
  cidr_block x;
  x.network.family = ip_family::v6;
  std::size_t i = 0;
  for (uint16_t g : groups) {
    x.network.bytes[i++] = static_cast<uint8_t>(g >> 8);
    x.network.bytes[i++] = static_cast<uint8_t>(g & 0xff);
  }
  x.network.bytes[15] = last;
  x.prefix = prefix;
  return x;
}

/// Most specific first: special_range_of returns the first block that holds
/// the address.
struct range_table {
  std::array<special_range, 25> ranges;
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
        {v6({}, 128, 0), "unspecified (::)"},
        {v6({}, 128, 1), "loopback (::1)"},
        {v6({0, 0, 0, 0, 0, 0xffff}, 96), "IPv4-mapped (::ffff:0:0/96)",
         ipv4_embedding::last_32_bits},
        {v6({0, 0, 0, 0, 0xffff}, 96), "IPv4-translated (::ffff:0:0:0/96)",
         ipv4_embedding::last_32_bits},
        {v6({}, 96), "IPv4-compatible (::/96)", ipv4_embedding::last_32_bits},
        {v6({0x64, 0xff9b}, 96), "NAT64 (64:ff9b::/96)", ipv4_embedding::last_32_bits},
        {v6({0x64, 0xff9b, 1}, 48), "local-use NAT64 (64:ff9b:1::/48)", ipv4_embedding::variable},
        {v6({0x64}, 16), "reserved for IPv4/IPv6 translation (64::/16)",
         ipv4_embedding::variable},
        {v6({0x100}, 64), "discard-only (100::/64)"},
        {v6({0x2001}, 32), "Teredo (2001::/32)", ipv4_embedding::teredo},
        {v6({0x2001, 0x0db8}, 32), "documentation (2001:db8::/32)"},
        {v6({0x2002}, 16), "6to4 (2002::/16)", ipv4_embedding::six_to_four},
        {v6({0xfe80}, 10), "link-local (fe80::/10)"},
        {v6({0xfec0}, 10), "site-local (fec0::/10)"},
        {v6({0xfc00}, 7), "unique local (fc00::/7)"},
        {v6({0xff00}, 8), "multicast (ff00::/8)"},
      }} {}
};

ip_address ipv4_at(const ip_address& addr, std::size_t offset, uint8_t flip = 0) {
  ip_address out;
  out.family = ip_family::v4;
  for (std::size_t i = 0; i < 4; ++i)
    out.bytes[i] = static_cast<uint8_t>(addr.bytes[offset + i] ^ flip);
  return out;
}

} // namespace

const special_range* special_range_of(const ip_address& addr) noexcept {
  static const range_table table; // immutable after construction
  for (const auto& r : table.ranges)
    if (r.block.network.family == addr.family && r.block.contains(addr))
      return &r;
  return nullptr;
}

std::vector<ip_address> embedded_ipv4(const ip_address& addr) {
  std::vector<ip_address> out;
  if (addr.family != ip_family::v6)
    return out;
  if (const special_range* r = special_range_of(addr)) {
    switch (r->embeds) {
      case ipv4_embedding::last_32_bits:
        out.push_back(ipv4_at(addr, 12));
        break;
      case ipv4_embedding::six_to_four:
        out.push_back(ipv4_at(addr, 2));
        break;
      case ipv4_embedding::teredo:
        out.push_back(ipv4_at(addr, 4));
        out.push_back(ipv4_at(addr, 12, 0xff));
        break;
      case ipv4_embedding::none:
      case ipv4_embedding::variable:
        break;
    }
  }
  // ISATAP: the interface identifier 0000:5efe or 0200:5efe, then the IPv4
  // address, below any /64 prefix.
  const auto& b = addr.bytes;
  if ((b[8] == 0x00 || b[8] == 0x02) && b[9] == 0x00 && b[10] == 0x5e && b[11] == 0xfe) {
    const ip_address isatap = ipv4_at(addr, 12);
    if (std::find(out.begin(), out.end(), isatap) == out.end())
      out.push_back(isatap);
  }
  return out;
}

ip_address unmap_ipv4(const ip_address& addr) noexcept {
  if (addr.family != ip_family::v6)
    return addr;
  for (std::size_t i = 0; i < 10; ++i)
    if (addr.bytes[i] != 0)
      return addr;
  if (addr.bytes[10] != 0xff || addr.bytes[11] != 0xff)
    return addr;
  return ipv4_at(addr, 12);
}

} // namespace castellan::proxy
