#include "actors/pool/sandbox_net_rights.hpp"

#include <algorithm>

#include "actors/pool/sandbox_profile.hpp"
#include "actors/proxy/destination_check.hpp"
#include "platform/linux/landlock.hpp"

namespace castellan {

namespace pol = castellan::policy;

namespace {

/// The lowest port a process without CAP_NET_BIND_SERVICE may bind: every
/// new network namespace starts with net.ipv4.ip_unprivileged_port_start
/// 1024, and castellan never changes it.
constexpr uint16_t first_unprivileged_port = 1024;

const pol::ip_address ipv4_loopback = pol::make_ipv4(0x7f000001);

/// "udp 127.0.0.1:53", "tcp [::1]:80".
std::string endpoint(pol::net_proto proto, const pol::ip_address& a, uint16_t port) {
  const std::string text = pol::to_string(a);
  return std::string(pol::to_string(proto)) + " " +
         (a.family == pol::ip_family::v6 ? "[" + text + "]" : text) + ":" + std::to_string(port);
}

/// The Landlock TCP right the kernel enforces in the sandbox for `right`
/// (landlock_net bits), or 0 when TCP is left alone (Landlock off, or a
/// kernel before ABI 4 under best effort).
bool landlock_restricts(const platform::sandbox_spec& spec, uint64_t right) {
  if (!spec.landlock.enabled)
    return false;
  return (spec.landlock.handled_net & right &
          platform::landlock_net_rights_of_abi(platform::landlock_abi())) != 0;
}

/// True when a Landlock rule of `spec` grants `right` on `port`.
bool landlock_grants(const platform::sandbox_spec& spec, uint64_t right, uint16_t port) {
  return std::any_of(spec.landlock.ports.begin(), spec.landlock.ports.end(),
                     [&](const platform::landlock_port_rule& r) {
                       return r.port == port && (r.access & right) != 0;
                     });
}

/// The ports a rule grants `right` on, for a reason ("3128", "no port").
std::string granted_ports(const platform::sandbox_spec& spec, uint64_t right) {
  std::string out;
  for (const auto& r : spec.landlock.ports)
    if ((r.access & right) != 0)
      out += (out.empty() ? "port " : ", ") + std::to_string(r.port);
  return out.empty() ? "no port" : out;
}

bool notified(const platform::sandbox_spec& spec, const char* syscall) {
  return std::find(spec.notify.syscalls.begin(), spec.notify.syscalls.end(), syscall) !=
         spec.notify.syscalls.end();
}

sandbox_net_decision through_relay(const platform::sandbox_spec& spec,
                                   const pol::compiled_policy& policy, pol::net_proto proto,
                                   const pol::ip_address& address, uint16_t port,
                                   std::string_view host) {
  if (spec.egress_port == 0)
    return {pol::action::deny,
            landlock_restricts(spec, platform::landlock_net::connect_tcp)
                ? net_outcome::refused
                : net_outcome::unreachable,
            "sandbox: no egress relay (the policy allows no TCP connection)"};
  if (proto != pol::net_proto::tcp)
    return {pol::action::deny, net_outcome::refused, "sandbox: the egress relay carries TCP only"};
  const std::string literal = pol::to_string(address);
  if (!host.empty())
    if (auto early = proxy::check_host_name(policy, host, port))
      return {pol::action::deny, net_outcome::refused, early->rule};
  const auto v = proxy::check_destination(policy, host.empty() ? literal : host, port, {address});
  const net_outcome o = v.verdict == pol::action::deny ? net_outcome::refused : net_outcome::done;
  if (v.rule == "special-range")
    return {v.verdict, o, "egress proxy: " + v.reason};
  // The proxy connects from the host: a loopback destination it lets
  // through is the host's loopback, not the sandbox's.
  static const pol::cidr_block loopback4{pol::make_ipv4(0x7f000000), 8};
  pol::ip_address loopback6;
  loopback6.family = pol::ip_family::v6;
  loopback6.bytes[15] = 1;
  const bool host_loopback = loopback4.contains(address) || address == loopback6;
  if (host_loopback && v.verdict != pol::action::deny)
    return {v.verdict, o, v.rule + " (through the egress proxy: the host's loopback)"};
  return {v.verdict, o, v.rule};
}

} // namespace

const char* to_string(net_call c) noexcept {
  switch (c) {
  case net_call::reach:
    return "reach";
  case net_call::connect:
    return "connect";
  case net_call::bind:
    return "bind";
  case net_call::relay:
    return "relay";
  }
  return "?";
}

const char* to_string(net_outcome o) noexcept {
  switch (o) {
  case net_outcome::done:
    return "done";
  case net_outcome::refused:
    return "refused";
  case net_outcome::unreachable:
    return "unreachable";
  }
  return "?";
}

void add_egress_relay(platform::sandbox_spec& spec, uint16_t port) {
  spec.loopback_up = true; // the relay listens there
  spec.egress_port = port;
  spec.landlock.ports.push_back({port, platform::landlock_net::connect_tcp});
}

sandbox_net_decision decide_net_in_sandbox(const platform::sandbox_spec& spec,
                                           const pol::compiled_policy& policy, net_call call,
                                           pol::net_proto proto, const pol::ip_address& address,
                                           uint16_t port, std::string_view host) {
  const bool local = sandbox_local(address);
  if (call == net_call::reach)
    call = proto == pol::net_proto::tcp && spec.egress_port != 0 && !local ? net_call::relay
                                                                           : net_call::connect;
  if (call == net_call::relay)
    return through_relay(spec, policy, proto, address, port, host);

  const bool bind = call == net_call::bind;
  const bool tcp = proto == pol::net_proto::tcp;
  const pol::decision p = policy.check_net(proto, address, port);
  // The sandbox refuses (or cannot reach) it: in the policy's name when the
  // policy denies it too, else in its own.
  auto closed = [&](net_outcome o, std::string why) -> sandbox_net_decision {
    if (p.verdict == pol::action::deny)
      return {pol::action::deny, o, std::string(p.pointer)};
    return {pol::action::deny, o, "sandbox: " + std::move(why)};
  };

  // The relay is castellan's own way out: not decided in the sandbox.
  if (!bind && tcp && spec.egress_port != 0 && port == spec.egress_port && address == ipv4_loopback)
    return {pol::action::allow, net_outcome::done,
            "castellan base: " + endpoint(proto, address, port) +
                " is the egress relay (the egress proxy decides where it leads)"};

  // 1. seccomp notify: the supervisor's decision.
  if (mediates_net(policy.document()) && notified(spec, bind ? "bind" : "connect")) {
    const pol::decision m = mediated_net_decision(policy, proto, address, port);
    if (m.verdict == pol::action::deny)
      return {pol::action::deny, net_outcome::refused, std::string(m.pointer)};
  }

  // 2. Landlock: TCP connect only where a rule grants it, bind likewise.
  const uint64_t right =
      bind ? platform::landlock_net::bind_tcp : platform::landlock_net::connect_tcp;
  if (tcp && landlock_restricts(spec, right) && !landlock_grants(spec, right, port))
    return closed(net_outcome::refused,
                  std::string("Landlock grants TCP ") + (bind ? "bind" : "connect") + " to " +
                      granted_ports(spec, right) +
                      (bind || spec.egress_port == 0 ? "" : " (the egress relay)"));

  // 3. The network namespace: loopback only, or (loopback_for) nothing up.
  const bool v4 = address.family == pol::ip_family::v4;
  const bool unspecified = local && (v4 ? address.bytes[0] == 0 : address.bytes[15] == 0);
  const std::string nothing_up = "no interface is up: the sandbox has no loopback";
  if (bind) {
    // IPv4 looks at the address first, IPv6 at the port.
    if (!local && v4)
      return closed(net_outcome::unreachable,
                    pol::to_string(address) + " is no address of the sandbox");
    if (port != 0 && port < first_unprivileged_port)
      return closed(net_outcome::refused,
                    "port " + std::to_string(port) +
                        " is below 1024 and sandboxed code has no CAP_NET_BIND_SERVICE");
    if (!local)
      return closed(net_outcome::unreachable,
                    pol::to_string(address) + " is no address of the sandbox");
    // 127.0.0.0/8 stays assigned to a loopback that is down; ::1 does not.
    if (!spec.loopback_up && !v4 && !unspecified)
      return closed(net_outcome::unreachable, pol::to_string(address) + ": " + nothing_up);
  } else {
    if (!local)
      return closed(net_outcome::unreachable, "no route to " + pol::to_string(address) +
                                                  " (the sandbox's network is loopback only)");
    // Without loopback, only a datagram to 0.0.0.0 is taken (and dropped).
    if (!spec.loopback_up && !(v4 && unspecified && !tcp))
      return closed(net_outcome::unreachable, nothing_up);
    // A TCP peer: the relay (127.0.0.1, which 0.0.0.0 reaches too), or one
    // the code listens on, where Landlock lets it bind.
    const bool relay = spec.egress_port != 0 && port == spec.egress_port && v4 &&
                       (address == ipv4_loopback || unspecified);
    if (tcp && !relay && landlock_restricts(spec, platform::landlock_net::bind_tcp) &&
        !landlock_grants(spec, platform::landlock_net::bind_tcp, port))
      return closed(net_outcome::unreachable,
                    "nothing can listen on " + endpoint(proto, address, port) +
                        " (Landlock grants TCP bind to " +
                        granted_ports(spec, platform::landlock_net::bind_tcp) + ")");
  }
  if (p.verdict != pol::action::deny)
    return {p.verdict, net_outcome::done, std::string(p.pointer)};
  if (!spec.loopback_up)
    return {pol::action::allow, net_outcome::done,
            "sandbox: " + std::string(p.pointer) + " denies it, but the kernel " +
                (bind ? "binds it" : "takes the datagram") + " and " + nothing_up +
                (bind ? ", so the socket can receive nothing" : ", so it is dropped"),
            true};
  // Denied by the policy, and nothing in this sandbox refuses it (no
  // supervisor mediation: a spec without the notify filter).
  return {pol::action::allow, net_outcome::done,
          std::string("sandbox: nothing decides ") + (bind ? "bind" : "connect") +
              " on its own loopback (no seccomp notify for net calls)"};
}

} // namespace castellan
