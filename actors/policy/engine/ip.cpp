#include "actors/policy/engine/ip.hpp"

#include <arpa/inet.h>

#include <cstring>

namespace castellan::policy {

namespace {

constexpr size_t max_address_text = 64;

// Turns ::ffff:a.b.c.d into a.b.c.d.
void unmap(ip_address& x) noexcept {
  if (x.family != ip_family::v6)
    return;
  for (size_t i = 0; i < 10; ++i)
    if (x.bytes[i] != 0)
      return;
  if (x.bytes[10] != 0xff || x.bytes[11] != 0xff)
    return;
  std::array<uint8_t, 16> v4{};
  std::memcpy(v4.data(), x.bytes.data() + 12, 4);
  x.bytes = v4;
  x.family = ip_family::v4;
}

bool is_mapped_prefix(const ip_address& x) noexcept {
  if (x.family != ip_family::v6)
    return false;
  for (size_t i = 0; i < 10; ++i)
    if (x.bytes[i] != 0)
      return false;
  return x.bytes[10] == 0xff && x.bytes[11] == 0xff;
}

} // namespace

std::optional<ip_address> parse_ip(std::string_view text) noexcept {
  // inet_pton needs a NUL-terminated string; copy into a bounded buffer.
  if (text.empty() || text.size() >= max_address_text)
    return std::nullopt;
  char buf[max_address_text];
  std::memcpy(buf, text.data(), text.size());
  buf[text.size()] = '\0';
  if (std::memchr(buf, '\0', text.size()) != nullptr)
    return std::nullopt;
  ip_address out;
  if (text.find(':') == std::string_view::npos) {
    out.family = ip_family::v4;
    if (inet_pton(AF_INET, buf, out.bytes.data()) != 1)
      return std::nullopt;
    return out;
  }
  out.family = ip_family::v6;
  if (inet_pton(AF_INET6, buf, out.bytes.data()) != 1)
    return std::nullopt;
  unmap(out);
  return out;
}

ip_address make_ipv4(uint32_t host_order) noexcept {
  ip_address out;
  out.family = ip_family::v4;
  out.bytes[0] = static_cast<uint8_t>(host_order >> 24);
  out.bytes[1] = static_cast<uint8_t>(host_order >> 16);
  out.bytes[2] = static_cast<uint8_t>(host_order >> 8);
  out.bytes[3] = static_cast<uint8_t>(host_order);
  return out;
}

std::string to_string(const ip_address& x) {
  char buf[INET6_ADDRSTRLEN] = {};
  const int af = x.family == ip_family::v4 ? AF_INET : AF_INET6;
  if (inet_ntop(af, x.bytes.data(), buf, sizeof(buf)) == nullptr)
    return "?";
  return buf;
}

ip_address mask_address(const ip_address& addr, unsigned prefix) noexcept {
  ip_address out = addr;
  const unsigned n = addr.size();
  for (unsigned i = 0; i < n; ++i) {
    const unsigned first_bit = i * 8u;
    if (prefix >= first_bit + 8u)
      continue;
    if (prefix <= first_bit) {
      out.bytes[i] = 0;
      continue;
    }
    const unsigned keep = prefix - first_bit; // 1..7
    out.bytes[i] = static_cast<uint8_t>(addr.bytes[i] & static_cast<uint8_t>(0xffu << (8u - keep)));
  }
  return out;
}

bool cidr_block::contains(const ip_address& addr) const noexcept {
  if (addr.family != network.family)
    return false;
  return mask_address(addr, prefix) == network;
}

outcome<cidr_block> parse_cidr(std::string_view text) {
  const auto slash = text.find('/');
  const std::string_view addr_text = text.substr(0, slash);
  if (addr_text.empty())
    return logic_failure("missing address before '/'");
  // Parse without unmapping first: the prefix length refers to the text.
  ip_address addr;
  if (addr_text.size() >= max_address_text)
    return logic_failure("'" + std::string{addr_text} + "' is not an IPv4 or IPv6 address");
  char buf[max_address_text];
  std::memcpy(buf, addr_text.data(), addr_text.size());
  buf[addr_text.size()] = '\0';
  const bool v6 = addr_text.find(':') != std::string_view::npos;
  addr.family = v6 ? ip_family::v6 : ip_family::v4;
  if (std::memchr(buf, '\0', addr_text.size()) != nullptr ||
      inet_pton(v6 ? AF_INET6 : AF_INET, buf, addr.bytes.data()) != 1)
    return logic_failure("'" + std::string{addr_text} + "' is not an IPv4 or IPv6 address");
  unsigned prefix = addr.bits();
  if (slash != std::string_view::npos) {
    const std::string_view len = text.substr(slash + 1);
    if (len.empty() || len.size() > 3)
      return logic_failure("prefix length must be 0.." + std::to_string(addr.bits()));
    if (len.size() > 1 && len.front() == '0')
      return logic_failure("prefix length '" + std::string{len} + "' has a leading zero");
    unsigned value = 0;
    for (char c : len) {
      if (c < '0' || c > '9')
        return logic_failure("prefix length '" + std::string{len} + "' is not a number");
      value = value * 10u + static_cast<unsigned>(c - '0');
    }
    if (value > addr.bits())
      return logic_failure("prefix length " + std::to_string(value) + " exceeds " +
                           std::to_string(addr.bits()) + " for an " + (v6 ? "IPv6" : "IPv4") +
                           " address");
    prefix = value;
  }
  const ip_address network = mask_address(addr, prefix);
  if (!(network == addr))
    return logic_failure("host bits set beyond /" + std::to_string(prefix) + " (the network is " +
                         to_string(network) + "/" + std::to_string(prefix) + ")");
  cidr_block out;
  out.network = network;
  out.prefix = static_cast<uint8_t>(prefix);
  if (is_mapped_prefix(network) && prefix >= 96) {
    ip_address v4;
    v4.family = ip_family::v4;
    std::memcpy(v4.bytes.data(), network.bytes.data() + 12, 4);
    out.network = v4;
    out.prefix = static_cast<uint8_t>(prefix - 96);
  }
  return out;
}

std::string to_string(const cidr_block& x) {
  return to_string(x.network) + "/" + std::to_string(x.prefix);
}

} // namespace castellan::policy
