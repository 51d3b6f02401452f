#pragma once

/// @file sandbox_net_rights.hpp
/// What a network call can do in a sandbox, derived in one place from the
/// sandbox spec and the policy, so that `castellan policy explain --net`
/// and the kernel agree by construction (the network counterpart of
/// sandbox_fs_rights.hpp).
///
/// A sandbox's network is its own namespace with loopback only (no route
/// leaves it), plus, when the policy allows network, the egress relay on
/// 127.0.0.1:<relay port>, which passes each connection to the egress proxy
/// (docs/egress.md). Layers, in the order the kernel meets them:
///  1. seccomp notify mediation (syscall_mediator, mediated_network.cpp),
///     when the policy has net decisions the static layers cannot take
///     (mediates_net): the policy's decision (mediated_net_decision) on
///     connect, bind and sends with an address; refused: EACCES;
///  2. Landlock (ABI ≥ 4): TCP connect only to the relay's port, TCP bind
///     nowhere; refused: EACCES. (TCP Fast Open, which connects without
///     Landlock's hook, is off in every sandbox: EOPNOTSUPP.)
///  3. the namespace: a port below 1024 needs CAP_NET_BIND_SERVICE, which
///     sandboxed code has not (EACCES); a destination off loopback has no
///     route (ENETUNREACH), a local address nobody can listen on refuses
///     the connection (ECONNREFUSED). A sandbox whose policy denies
///     everything on its own addresses has no loopback up (loopback_for):
///     nothing is reachable, not even itself; the kernel still binds
///     127.0.0.1 or the unspecified address and takes a datagram to
///     0.0.0.0 (and drops it), which the policy denies and nothing can
///     come of (sandbox_net_decision::unenforced);
///  4. for a connection through the relay, the proxy's decision
///     (proxy::check_destination: the policy plus its special ranges);
///     refused: `403 Forbidden`.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/mediation/network_layers.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "platform/linux/sandbox_spec.hpp"

namespace castellan {

/// A network call, as `policy explain --net` names it.
enum class net_call : uint8_t {
  /// The way code reaches a destination: a TCP destination off the
  /// sandbox's loopback through the egress relay when the sandbox has one,
  /// anything else directly (connect).
  reach,
  connect, ///< TCP connect; UDP connect or a send with an address (decided alike)
  bind,    ///< as that local endpoint
  relay,   ///< a `CONNECT addr:port` through the egress relay (TCP only)
};

/// "reach", "connect", "bind", "relay".
const char* to_string(net_call c) noexcept;

/// How the call ends, as the code in the sandbox sees it.
enum class net_outcome : uint8_t {
  done,        ///< connected, sent or bound; through the relay: the proxy let it through
  refused,     ///< EACCES (mediation, Landlock, a privileged port); the relay's 403
  unreachable, ///< no route (ENETUNREACH), no such local address, nothing can listen there
};

const char* to_string(net_outcome o) noexcept;

struct sandbox_net_decision {
  policy::action verdict = policy::action::deny;
  net_outcome outcome = net_outcome::refused;
  /// "/net/rules/3", "default" (the policy's own answer, which the sandbox
  /// carries out), "sandbox: …", "egress proxy: …", "castellan base: …".
  std::string by;
  /// The kernel does what the policy denies, and nothing can come of it: a
  /// bind on the unspecified address of a sandbox without loopback (no
  /// interface is up, so the socket can receive nothing). Not a grant.
  bool unenforced = false;
};

/// What `call` with `proto` to (or, for bind, on) `address`:`port` does in
/// a sandbox built from `spec` (with its relay, add_egress_relay) under
/// `policy`. `spec` is the sandbox the workers get; a pool without a
/// sandbox has nothing to decide here.
/// `host`, when given, is the name the code asked the relay for (the
/// proxy checks the host lists on it); a direct call has no name.
sandbox_net_decision decide_net_in_sandbox(const platform::sandbox_spec& spec,
                                           const policy::compiled_policy& policy, net_call call,
                                           policy::net_proto proto,
                                           const policy::ip_address& address, uint16_t port,
                                           std::string_view host = {});

/// Gives `spec` the egress relay on 127.0.0.1:`port`: PID 1 listens there,
/// and Landlock lets the interpreter connect to that port.
void add_egress_relay(platform::sandbox_spec& spec, uint16_t port);

} // namespace castellan
