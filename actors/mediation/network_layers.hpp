#pragma once

/// @file network_layers.hpp
/// Which layer of a sandbox takes a network call under a policy: whether the
/// sandbox gets the egress relay (allows_network) and its loopback
/// (loopback_for), and which calls the supervisor decides itself
/// (mediates_net, mediated_net_decision). The mediator, the sandbox
/// profile and `policy explain` (sandbox_net_rights.hpp) all ask here, so
/// that what the sandbox is built with and what the supervisor decides
/// cannot drift apart.

#include <cstdint>

#include "actors/policy/engine/compiled_policy.hpp"

namespace castellan {

/// True when `doc` can allow some TCP connection: a net default other than
/// deny, a non-empty host allow list, or an allowing/warning tcp rule. Such
/// a policy gets the egress relay (actors/proxy); any other keeps loopback only.
bool allows_network(const policy::policy_document& doc);

/// True for an address that reaches the sandbox's own network stack:
/// 127.0.0.0/8, ::1 and the unspecified addresses 0.0.0.0 and :: (as a
/// destination, Linux takes them for the local host). The namespace closes
/// every other destination (no route); these it leaves open.
bool sandbox_local(const policy::ip_address& address) noexcept;

/// True when a sandbox under `doc` gets its loopback interface up: the
/// policy allows network (the egress relay listens on loopback), or it may
/// allow (or warn about) something on the sandbox's own addresses. Any
/// other policy denies everything a loopback could carry, and the sandbox
/// has none: no interface is up, nothing is routed, even to itself.
bool loopback_for(const policy::policy_document& doc);

/// True when the supervisor decides net calls of a sandbox under `doc`
/// (seccomp notify on connect, bind, sendto, sendmsg, sendmmsg): a warn
/// (rule or default); a deny rule narrower than "every address, every
/// port" (a whole-family deny off loopback is the namespace's to enforce);
/// and, where the sandbox has its loopback (loopback_for), any deny that
/// may reach its own addresses (a deny default, a deny rule covering them,
/// a host allow list, which no direct call passes): Landlock closes the
/// loopback to TCP, but only the supervisor closes it to UDP.
bool mediates_net(const policy::policy_document& doc);

/// The decision the supervisor applies to a mediated call: the policy's,
/// except that a default deny off the sandbox's loopback is left to
/// Landlock and the namespace (which refuse it anyway, EACCES or
/// ENETUNREACH) so that it costs nothing and names its real cause.
policy::decision mediated_net_decision(const policy::compiled_policy& policy,
                                       policy::net_proto proto, const policy::ip_address& address,
                                       uint16_t port);

} // namespace castellan
