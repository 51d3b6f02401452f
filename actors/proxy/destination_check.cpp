/// @file destination_check.cpp
/// See destination_check.hpp.

#include "actors/proxy/destination_check.hpp"

#include <algorithm>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/proxy/special_ranges.hpp"

namespace castellan::proxy {

namespace {

using policy::action;

/// The index of the first net rule that allows or warns on `addr`:`port`
/// and whose block lies inside `range`; -1 if none.
int explicit_rule_for(const policy::policy_document& doc, const special_range& range,
                      const policy::ip_address& addr, uint16_t port) {
  for (std::size_t i = 0; i < doc.net_rules.size(); ++i) {
    const auto& r = doc.net_rules[i];
    if (r.verdict == action::deny || r.proto != policy::net_proto::tcp)
      continue;
    const auto& block = r.cidr;
    if (block.network.family != range.block.network.family ||
        block.prefix < range.block.prefix || !range.block.contains(block.network) ||
        !block.contains(addr))
      continue;
    if (std::any_of(r.ports.begin(), r.ports.end(),
                    [&](const policy::port_range& p) { return p.contains(port); }))
      return static_cast<int>(i);
  }
  return -1;
}

std::string describe(std::string_view host, uint16_t port, const std::string& address) {
  std::string out(host);
  out += ':';
  out += std::to_string(port);
  if (address != host) {
    out += " (";
    out += address;
    out += ')';
  }
  return out;
}

} // namespace

std::optional<destination_verdict> check_host_name(const policy::compiled_policy& policy,
                                                   std::string_view host, uint16_t port) {
  const auto& hosts = policy.document().hosts;
  auto deny = [&](std::string rule) {
    destination_verdict v;
    v.rule = std::move(rule);
    v.reason = "denied " + std::string(host) + ":" + std::to_string(port) + " by " + v.rule;
    return v;
  };
  for (std::size_t i = 0; i < hosts.deny.size(); ++i)
    if (policy::host_matches(hosts.deny[i], host))
      return deny("/net/hosts/deny/" + std::to_string(i));
  if (hosts.allow && std::none_of(hosts.allow->begin(), hosts.allow->end(),
                                  [&](const std::string& p) {
                                    return policy::host_matches(p, host);
                                  }))
    return deny("/net/hosts/allow");
  return std::nullopt;
}

namespace {

/// One address's verdict (before the whole destination is combined).
struct address_verdict {
  action verdict = action::allow;
  std::string rule;
  std::string denial; ///< non-empty: why it is denied ("by /net/rules/0", …)
};

action stricter(action a, action b) {
  return static_cast<int>(a) < static_cast<int>(b) ? b : a;
}

/// Rules 1 and 2 of destination_check.hpp for one address, then, for an
/// address that carries an IPv4 address (special_ranges.hpp), the same for
/// that IPv4 address: the IPv4 rules decide it as if it were the
/// destination, so an explicit rule for a NAT64 or 6to4 block does not open
/// the IPv4 loopback or private networks through it.
address_verdict check_address(const policy::compiled_policy& policy, std::string_view host,
                              uint16_t port, const policy::ip_address& addr) {
  address_verdict out;
  const policy::decision d = policy.check_net(policy::net_proto::tcp, addr, port, host);
  if (d.verdict == action::deny) {
    out.verdict = action::deny;
    out.rule = std::string(d.pointer);
    out.denial = "by " + out.rule;
    return out;
  }
  out.verdict = d.verdict;
  out.rule = std::string(d.pointer);
  if (const special_range* range = special_range_of(addr)) {
    const int i = explicit_rule_for(policy.document(), *range, addr, port);
    if (i < 0) {
      out.verdict = action::deny;
      out.rule = "special-range";
      out.denial = "by special-range: " + std::string(range->name) +
                   " is refused unless a net rule allows it explicitly";
      return out;
    }
    // The explicit rule is what lets this address through: it reports,
    // unless the engine's verdict was stricter (warn) for another reason.
    const auto& r = policy.document().net_rules[static_cast<std::size_t>(i)];
    if (r.verdict == action::warn || out.verdict != action::warn) {
      out.verdict = stricter(out.verdict, r.verdict);
      out.rule = "/net/rules/" + std::to_string(i);
    }
  }
  for (const auto& inner : embedded_ipv4(addr)) {
    const address_verdict v = check_address(policy, host, port, inner);
    const std::string text = policy::to_string(inner);
    if (v.verdict == action::deny) {
      out.verdict = action::deny;
      out.rule = v.rule;
      out.denial = "by " + v.rule + ": it carries the IPv4 address " + text + ", denied " +
                   v.denial;
      return out;
    }
    if (v.verdict == action::warn && out.verdict != action::warn) {
      out.verdict = action::warn;
      out.rule = v.rule;
    }
  }
  return out;
}

} // namespace

destination_verdict check_destination(const policy::compiled_policy& policy,
                                      std::string_view host, uint16_t port,
                                      const std::vector<policy::ip_address>& raw_addresses) {
  destination_verdict out;
  if (raw_addresses.empty()) {
    out.rule = "resolve";
    out.reason = "denied " + std::string(host) + ":" + std::to_string(port) +
                 ": the name has no address";
    return out;
  }
  action worst = action::allow;
  std::string worst_rule;
  for (const auto& raw : raw_addresses) {
    // A mapped address is the IPv4 address: the IPv4 rules decide it, and
    // the proxy connects to it as IPv4.
    const policy::ip_address addr = unmap_ipv4(raw);
    if (std::find(out.allowed.begin(), out.allowed.end(), addr) != out.allowed.end())
      continue;
    const std::string text = policy::to_string(addr);
    const address_verdict v = check_address(policy, host, port, addr);
    if (v.verdict == action::deny) {
      destination_verdict denied;
      denied.rule = v.rule;
      denied.address = text;
      denied.reason = "denied " + describe(host, port, text) + " " + v.denial;
      return denied;
    }
    if (out.allowed.empty() || (v.verdict == action::warn && worst != action::warn)) {
      worst = v.verdict;
      worst_rule = v.rule;
      if (out.allowed.empty() || v.verdict == action::warn)
        out.address = text;
    }
    out.allowed.push_back(addr);
  }
  out.verdict = worst;
  out.rule = worst_rule;
  out.reason = std::string(worst == action::warn ? "warned " : "allowed ") +
               describe(host, port, out.address) + " by " + out.rule;
  return out;
}

} // namespace castellan::proxy
