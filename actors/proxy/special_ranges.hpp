#pragma once

/// @file special_ranges.hpp
/// Address blocks that never reach the internet and often reach something
/// valuable instead: the host itself (loopback), the cloud metadata service
/// (169.254.169.254, link-local), the operator's private networks (RFC 1918,
/// shared address space, IPv6 ULA and link-local), multicast and the
/// unspecified addresses. The egress proxy denies a connection to any of
/// them unless a net rule allows that block explicitly (see
/// destination_check.hpp), whatever the host lists and defaults say.

#include <string_view>

#include "actors/policy/engine/ip.hpp"

namespace castellan::proxy {

struct special_range {
  policy::cidr_block block;
  std::string_view name; ///< "loopback", "link-local (cloud metadata)", …
};

/// The special range `addr` lies in, or nullptr.
const special_range* special_range_of(const policy::ip_address& addr) noexcept;

} // namespace castellan::proxy
