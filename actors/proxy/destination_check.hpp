#pragma once

/// @file destination_check.hpp
/// The decision for one destination: a host name (or address literal) and a
/// port, with every address the proxy itself resolved the name to. CAF-free
/// and socket-free: the session resolves, this decides, and the session then
/// connects only to the addresses returned here.
///
/// Rules, strictest first:
/// 1. Every resolved address is checked with the policy engine
///    (`check_net(tcp, address, port, host)`: net.rules on the address,
///    net.hosts on the name, the net default). One denied address denies the
///    whole destination: a name that resolves to a public and a private
///    address is refused, not half-used.
/// 2. An address in a special range (special_ranges.hpp) is denied unless a
///    net rule that allows (or warns) explicitly covers it: the rule's block
///    must lie inside that special range (`127.0.0.0/8`, `169.254.169.254/32`),
///    so `0.0.0.0/0` or a host-list entry never opens the host's loopback or
///    the cloud metadata service. An IPv6 address that carries an IPv4
///    address (NAT64, 6to4, Teredo, IPv4-compatible/translated, ISATAP) then
///    has that IPv4 address checked by rules 1 and 2 as well; an IPv4-mapped
///    address is decided as the IPv4 address itself.
/// 3. The verdict is the most restrictive one met (warn over allow), with the
///    rule that gave it.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/action.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/ip.hpp"

namespace castellan::proxy {

struct destination_verdict {
  policy::action verdict = policy::action::deny;
  /// The deciding rule: a JSON pointer ("/net/rules/2", "/net/hosts/deny/0",
  /// "/net/hosts/allow"), "default", or "special-range" for rule 2 above.
  std::string rule;
  /// One line for the 403 body and the audit record.
  std::string reason;
  /// The address the verdict is about (the denied one, or the first allowed).
  std::string address;
  /// Deduplicated, in resolver order: the only addresses the proxy may
  /// connect to (empty when denied).
  std::vector<policy::ip_address> allowed;
};

/// Decides what the host lists alone say about `host` (normalised), before
/// anything is resolved: a name on net.hosts.deny, or missing from a present
/// net.hosts.allow, is denied without a DNS query (a query for a name is
/// itself a way to send data out). Returns a deny verdict, or nothing when
/// the name may be resolved.
std::optional<destination_verdict> check_host_name(const policy::compiled_policy& policy,
                                                   std::string_view host, uint16_t port);

/// Decides `host`:`port` resolved to `addresses` under `policy`.
destination_verdict check_destination(const policy::compiled_policy& policy,
                                      std::string_view host, uint16_t port,
                                      const std::vector<policy::ip_address>& addresses);

} // namespace castellan::proxy
