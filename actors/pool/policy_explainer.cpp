#include "actors/pool/policy_explainer.hpp"

#include <utility>

#include "actors/mediation/sandbox_fixed_paths.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/install_layout.hpp"
#include "platform/linux/host_permissions.hpp"

namespace castellan {

namespace {

namespace pol = castellan::policy;

// "PERM[,PERM…]:PATH"
bool parse_fs_query(const std::string& q, pol::fs_access& mask, std::string& path) {
  const auto colon = q.find(':');
  if (colon == std::string::npos)
    return false;
  mask = 0;
  std::string perms = q.substr(0, colon);
  size_t start = 0;
  while (start <= perms.size()) {
    auto comma = perms.find(',', start);
    if (comma == std::string::npos)
      comma = perms.size();
    auto m = pol::parse_fs_perm(perms.substr(start, comma - start));
    if (!m)
      return false;
    mask |= *m;
    start = comma + 1;
  }
  path = q.substr(colon + 1);
  return !path.empty();
}

// "[CALL:]PROTO:ADDR:PORT[:HOST]", with "[v6]" for IPv6 addresses; CALL is
// connect, bind or relay (default: reach).
bool parse_net_query(const std::string& q, net_call& call, pol::net_proto& proto,
                     pol::ip_address& addr, uint16_t& port, std::string& host) {
  std::size_t start = 0;
  call = net_call::reach;
  for (net_call c : {net_call::connect, net_call::bind, net_call::relay}) {
    const std::string prefix = std::string(to_string(c)) + ":";
    if (q.compare(0, prefix.size(), prefix) == 0) {
      call = c;
      start = prefix.size();
    }
  }
  const auto c1 = q.find(':', start);
  if (c1 == std::string::npos)
    return false;
  auto p = pol::parse_net_proto(q.substr(start, c1 - start));
  if (!p)
    return false;
  proto = *p;
  std::string rest = q.substr(c1 + 1);
  std::string addr_text;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos || close + 1 >= rest.size() || rest[close + 1] != ':')
      return false;
    addr_text = rest.substr(1, close - 1);
    rest = rest.substr(close + 2);
  } else {
    const auto c2 = rest.find(':');
    if (c2 == std::string::npos)
      return false;
    addr_text = rest.substr(0, c2);
    rest = rest.substr(c2 + 1);
  }
  auto a = pol::parse_ip(addr_text);
  if (!a)
    return false;
  addr = *a;
  const auto c3 = rest.find(':');
  const std::string port_text = rest.substr(0, c3);
  host = c3 == std::string::npos ? std::string{} : rest.substr(c3 + 1);
  if (port_text.empty() || port_text.size() > 5)
    return false;
  unsigned long value = 0;
  for (char c : port_text) {
    if (c < '0' || c > '9')
      return false;
    value = value * 10 + static_cast<unsigned long>(c - '0');
  }
  if (value > 65535)
    return false;
  port = static_cast<uint16_t>(value);
  return true;
}

// "PATH" or "PATH:SHA256" (64 hex digits after the last colon).
void parse_exec_query(const std::string& q, std::string& path, std::string& sha) {
  const auto colon = q.rfind(':');
  if (colon != std::string::npos && q.size() - colon - 1 == 64) {
    path = q.substr(0, colon);
    sha = q.substr(colon + 1);
    return;
  }
  path = q;
  sha.clear();
}

std::string origin_of(const pol::policy_document& doc, const pol::decision& d) {
  if (d.source != pol::decision_source::rule || d.index < 0)
    return {};
  const auto i = static_cast<size_t>(d.index);
  if (d.pointer.rfind("/fs/", 0) == 0 && i < doc.fs_rules.size())
    return doc.fs_rules[i].origin;
  if (d.pointer.rfind("/net/", 0) == 0 && i < doc.net_rules.size())
    return doc.net_rules[i].origin;
  if (d.pointer.rfind("/exec/", 0) == 0 && i < doc.exec_rules.size())
    return doc.exec_rules[i].origin;
  return {};
}

} // namespace

std::string_view to_string(explain_kind kind) {
  switch (kind) {
  case explain_kind::fs:
    return "fs";
  case explain_kind::net:
    return "net";
  case explain_kind::exec:
    return "exec";
  }
  return "?";
}

std::string explain_syntax(explain_kind kind) {
  switch (kind) {
  case explain_kind::fs:
    return "PERM[,PERM…]:PATH";
  case explain_kind::net:
    return "[connect:|bind:|relay:]PROTO:ADDR:PORT[:HOST] (IPv6 as [ADDR])";
  case explain_kind::exec:
    return "PATH[:SHA256]";
  }
  return {};
}

std::optional<platform::sandbox_spec> sandbox_of(const pol::policy_document& doc) {
  pool_config pc;
  if (auto layout = platform::find_install_layout())
    pc.harness = layout->harness;
  else
    pc.harness = std::string(sandbox_harness_dir) + "/castellan_harness.py";
  if (!apply_policy(doc, pc) || pc.isolation != platform::isolation_mode::namespaces)
    return std::nullopt;
  auto spec = make_sandbox_spec(pc.sandbox, pc.harness);
  if (!spec)
    return std::nullopt;
  if (pc.egress_policy && pc.egress_port != 0)
    add_egress_relay(*spec, pc.egress_port);
  return std::move(*spec);
}

std::vector<std::string> policy_warnings(const pol::policy_document& doc) {
  if (auto sandbox = sandbox_of(doc))
    if (auto ids = platform::default_sandbox_host_ids())
      return platform::unwritable_binds(sandbox->root, *ids);
  return {};
}

policy_explainer::policy_explainer(std::shared_ptr<const pol::compiled_policy> policy)
  : policy_(std::move(policy)), sandbox_(sandbox_of(policy_->document())) {}

outcome<explanation> policy_explainer::explain(explain_kind kind, const std::string& query) const {
  explanation out;
  out.kind = kind;
  out.query = query;
  auto malformed = [&] {
    std::string text = "wants " + explain_syntax(kind) + ", got '" + query + "'";
    if (kind == explain_kind::fs)
      text += " (permissions: " + std::string(pol::fs_perm_vocabulary()) + ")";
    return logic_failure(std::move(text));
  };
  pol::decision d;
  switch (kind) {
  case explain_kind::fs: {
    pol::fs_access mask = 0;
    std::string path;
    if (!parse_fs_query(query, mask, path))
      return malformed();
    d = policy_->check_fs(path, mask);
    if (sandbox_) {
      const sandbox_decision sd = decide_in_sandbox(*sandbox_, *policy_, path, mask);
      if (sd.by != d.pointer) {
        out.verdict = sd.verdict;
        out.by = sd.by;
        out.by_sandbox = true;
        return out;
      }
    }
    break;
  }
  case explain_kind::net: {
    net_call call = net_call::reach;
    pol::net_proto proto = pol::net_proto::tcp;
    pol::ip_address addr;
    uint16_t port = 0;
    std::string host;
    if (!parse_net_query(query, call, proto, addr, port, host))
      return malformed();
    d = policy_->check_net(proto, addr, port, host);
    if (sandbox_) {
      const sandbox_net_decision sd =
          decide_net_in_sandbox(*sandbox_, *policy_, call, proto, addr, port, host);
      if (sd.by != d.pointer || sd.verdict != d.verdict) {
        out.verdict = sd.verdict;
        out.by = sd.by;
        out.by_sandbox = true;
        return out;
      }
    }
    break;
  }
  case explain_kind::exec: {
    std::string path;
    std::string sha;
    parse_exec_query(query, path, sha);
    d = policy_->check_exec(path, sha);
    break;
  }
  }
  out.verdict = d.verdict;
  out.by = std::string(d.pointer);
  out.source = d.source;
  out.origin = origin_of(policy_->document(), d);
  return out;
}

} // namespace castellan
