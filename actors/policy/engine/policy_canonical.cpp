#include "actors/policy/engine/policy_canonical.hpp"

#include <algorithm>
#include <utility>
#include <vector>

namespace castellan::policy {

namespace {

using json = nlohmann::json;

json plugin_json(const std::optional<plugin_setting>& p) {
  const plugin_setting e = policy_document::effective(p);
  return json{{"enabled", e.enabled}, {"best_effort", e.best_effort}};
}

json perms_json(fs_access mask) {
  std::vector<std::string> names;
  for (unsigned bit = 0; bit < fs_perm_count; ++bit)
    if (mask & (1u << bit))
      names.emplace_back(fs_perm_name(bit));
  std::sort(names.begin(), names.end());
  return names;
}

/// "80,443,8000-9000": sorted, overlapping and adjacent ranges merged.
std::string ports_text(std::vector<port_range> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const port_range& a, const port_range& b) {
    return a.from != b.from ? a.from < b.from : a.to < b.to;
  });
  std::vector<port_range> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && uint32_t{r.from} <= uint32_t{merged.back().to} + 1) {
      merged.back().to = std::max(merged.back().to, r.to);
      continue;
    }
    merged.push_back(r);
  }
  std::string out;
  for (const auto& r : merged) {
    if (!out.empty())
      out += ',';
    out += std::to_string(r.from);
    if (r.to != r.from)
      out += '-' + std::to_string(r.to);
  }
  return out;
}

std::vector<std::string> sorted_unique(std::vector<std::string> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

} // namespace

nlohmann::json canonical_json(const policy_document& doc) {
  json out = json::object();
  out["version"] = doc.version;
  if (!doc.extends.empty())
    out["extends"] = doc.extends; // unresolved: the names are part of what it says
  out["plugins"] = json{{"namespaces", plugin_json(doc.plugins.namespaces)},
                        {"landlock", plugin_json(doc.plugins.landlock)},
                        {"seccomp", plugin_json(doc.plugins.seccomp)},
                        {"cgroups", plugin_json(doc.plugins.cgroups)}};
  out["defaults"] = json{{"fs", to_string(doc.effective_fs_default())},
                         {"net", to_string(doc.effective_net_default())},
                         {"exec", to_string(doc.effective_exec_default())}};
  json fs = json::array();
  for (const auto& r : doc.fs_rules)
    fs.push_back(
        json{{"action", to_string(r.verdict)}, {"path", r.path}, {"perms", perms_json(r.perms)}});
  out["fs"] = json{{"rules", std::move(fs)}};
  json net_rules = json::array();
  for (const auto& r : doc.net_rules)
    net_rules.push_back(json{{"action", to_string(r.verdict)},
                             {"proto", to_string(r.proto)},
                             {"cidr", r.cidr_text},
                             {"ports", ports_text(r.ports)}});
  json hosts = json::object();
  if (doc.hosts.allow) // absent and empty differ: an empty list denies every name
    hosts["allow"] = *doc.hosts.allow;
  hosts["deny"] = doc.hosts.deny;
  out["net"] = json{{"rules", std::move(net_rules)}, {"hosts", std::move(hosts)}};
  json exec = json::array();
  for (const auto& r : doc.exec_rules) {
    json j{{"action", to_string(r.verdict)}, {"path", r.path}};
    if (r.sha256)
      j["sha256"] = *r.sha256;
    exec.push_back(std::move(j));
  }
  out["exec"] = json{{"rules", std::move(exec)}};
  out["antiEscape"] = json{{"denySyscalls", sorted_unique(doc.deny_syscalls)}};
  out["audit"] = json{{"enabled", doc.audit.enabled.value_or(false)},
                      {"events", sorted_unique(doc.audit.events)}};
  json limits = json::object();
  auto put = [&](const char* key, const std::optional<uint64_t>& v) {
    if (v)
      limits[key] = *v;
  };
  const auto& l = doc.limits;
  put("timeout_ms", l.timeout_ms);
  put("memory_bytes", l.memory_bytes);
  put("pids", l.pids);
  put("cpu_percent", l.cpu_percent);
  put("stdout_bytes", l.stdout_bytes);
  put("stderr_bytes", l.stderr_bytes);
  put("code_bytes", l.code_bytes);
  out["limits"] = std::move(limits);
  return out;
}

std::string canonical_text(const policy_document& doc) {
  return canonical_json(doc).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace castellan::policy
