#include "actors/mediation/network_layers.hpp"

#include <algorithm>

#include "actors/mediation/decided_call.hpp"

namespace castellan {

namespace pol = castellan::policy;

namespace {

const pol::ip_address ipv4_loopback = pol::make_ipv4(0x7f000001);

/// A net rule the supervisor decides wherever it applies: a warn, or a
/// deny narrower than every address and port of a family (that one the
/// namespace enforces off loopback; on it, see mediates_net).
bool is_decided(const pol::net_rule& rule) {
  if (rule.verdict == pol::action::warn)
    return true;
  if (rule.verdict != pol::action::deny)
    return false;
  const bool every_port = std::any_of(rule.ports.begin(), rule.ports.end(),
                                      [](const auto& r) { return r.from == 0 && r.to == 65535; });
  return !(rule.cidr.prefix == 0 && every_port);
}

/// True when `block` holds one of the sandbox's own addresses (sandbox_local).
bool covers_local(const pol::cidr_block& block) {
  if (block.network.family == pol::ip_family::v4)
    return block.contains(pol::make_ipv4(0)) ||
           (block.prefix <= 8 ? block.contains(ipv4_loopback) : block.network.bytes[0] == 127);
  pol::ip_address any;
  any.family = pol::ip_family::v6;
  pol::ip_address one = any;
  one.bytes[15] = 1;
  return block.contains(any) || block.contains(one);
}

/// May the policy allow (or warn about) a call on the sandbox's own
/// addresses? Ports and protocols aside: erring towards yes only keeps the
/// loopback up, where mediation then decides.
bool local_may_pass(const pol::policy_document& doc) {
  return doc.effective_net_default() != pol::action::deny ||
         std::any_of(doc.net_rules.begin(), doc.net_rules.end(), [](const pol::net_rule& r) {
           return r.verdict != pol::action::deny && covers_local(r.cidr);
         });
}

/// May the policy deny (or warn about) a call on the sandbox's own
/// addresses? Erring towards yes only costs mediation.
bool local_may_stop(const pol::policy_document& doc) {
  return doc.effective_net_default() != pol::action::allow || doc.hosts.allow.has_value() ||
         std::any_of(doc.net_rules.begin(), doc.net_rules.end(), [](const pol::net_rule& r) {
           return r.verdict != pol::action::allow && covers_local(r.cidr);
         });
}

} // namespace

bool allows_network(const pol::policy_document& doc) {
  if (doc.effective_net_default() != pol::action::deny)
    return true;
  if (doc.hosts.allow && !doc.hosts.allow->empty())
    return true;
  return std::any_of(doc.net_rules.begin(), doc.net_rules.end(), [](const auto& r) {
    return r.verdict != pol::action::deny && r.proto == pol::net_proto::tcp;
  });
}

bool sandbox_local(const pol::ip_address& a) noexcept {
  if (a.family == pol::ip_family::v4)
    return a.bytes[0] == 127 ||
           (a.bytes[0] == 0 && a.bytes[1] == 0 && a.bytes[2] == 0 && a.bytes[3] == 0);
  for (unsigned i = 0; i < 15; ++i)
    if (a.bytes[i] != 0)
      return false;
  return a.bytes[15] <= 1; // :: or ::1
}

bool loopback_for(const pol::policy_document& doc) {
  return allows_network(doc) || local_may_pass(doc);
}

bool mediates_net(const pol::policy_document& doc) {
  return doc.effective_net_default() == pol::action::warn ||
         std::any_of(doc.net_rules.begin(), doc.net_rules.end(),
                     [](const pol::net_rule& r) { return is_decided(r); }) ||
         (loopback_for(doc) && local_may_stop(doc));
}

pol::decision mediated_net_decision(const pol::compiled_policy& policy, pol::net_proto proto,
                                    const pol::ip_address& address, uint16_t port) {
  const pol::decision d = policy.check_net(proto, address, port);
  return sandbox_local(address) ? d : mediation::rules_only(d);
}

} // namespace castellan
