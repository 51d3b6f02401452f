#include "actors/policy/engine/policy_document.hpp"

namespace castellan::policy {

namespace {

using ojson = nlohmann::ordered_json;

ojson plugin_json(const plugin_setting& p) {
  if (!p.object_form && !p.best_effort)
    return p.enabled;
  ojson out = ojson::object();
  out["enabled"] = p.enabled;
  out["best_effort"] = p.best_effort;
  return out;
}

} // namespace

nlohmann::ordered_json to_json(const policy_document& doc) {
  ojson out = ojson::object();
  out["version"] = doc.version;
  if (!doc.description.empty())
    out["description"] = doc.description;
  if (!doc.extends.empty())
    out["extends"] = doc.extends;
  const auto& pl = doc.plugins;
  if (pl.namespaces || pl.landlock || pl.seccomp || pl.cgroups) {
    ojson p = ojson::object();
    if (pl.namespaces)
      p["namespaces"] = plugin_json(*pl.namespaces);
    if (pl.landlock)
      p["landlock"] = plugin_json(*pl.landlock);
    if (pl.seccomp)
      p["seccomp"] = plugin_json(*pl.seccomp);
    if (pl.cgroups)
      p["cgroups"] = plugin_json(*pl.cgroups);
    out["plugins"] = std::move(p);
  }
  const auto& d = doc.defaults;
  if (d.fs || d.net || d.exec) {
    ojson p = ojson::object();
    if (d.fs)
      p["fs"] = to_string(*d.fs);
    if (d.net)
      p["net"] = to_string(*d.net);
    if (d.exec)
      p["exec"] = to_string(*d.exec);
    out["defaults"] = std::move(p);
  }
  if (!doc.fs_rules.empty()) {
    ojson rules = ojson::array();
    for (const auto& r : doc.fs_rules) {
      ojson j = ojson::object();
      j["action"] = to_string(r.verdict);
      j["path"] = r.path;
      j["perms"] = r.perm_names;
      rules.push_back(std::move(j));
    }
    out["fs"]["rules"] = std::move(rules);
  }
  if (!doc.net_rules.empty() || doc.hosts.allow || !doc.hosts.deny.empty()) {
    ojson net = ojson::object();
    if (!doc.net_rules.empty()) {
      ojson rules = ojson::array();
      for (const auto& r : doc.net_rules) {
        ojson j = ojson::object();
        j["action"] = to_string(r.verdict);
        j["proto"] = to_string(r.proto);
        j["cidr"] = r.cidr_text;
        j["ports"] = r.ports_text;
        rules.push_back(std::move(j));
      }
      net["rules"] = std::move(rules);
    }
    if (doc.hosts.allow || !doc.hosts.deny.empty()) {
      ojson hosts = ojson::object();
      if (doc.hosts.allow)
        hosts["allow"] = *doc.hosts.allow;
      if (!doc.hosts.deny.empty())
        hosts["deny"] = doc.hosts.deny;
      net["hosts"] = std::move(hosts);
    }
    out["net"] = std::move(net);
  }
  if (!doc.exec_rules.empty()) {
    ojson rules = ojson::array();
    for (const auto& r : doc.exec_rules) {
      ojson j = ojson::object();
      j["action"] = to_string(r.verdict);
      j["path"] = r.path;
      if (r.sha256)
        j["sha256"] = *r.sha256;
      rules.push_back(std::move(j));
    }
    out["exec"]["rules"] = std::move(rules);
  }
  if (!doc.deny_syscalls.empty())
    out["antiEscape"]["denySyscalls"] = doc.deny_syscalls;
  if (doc.audit.enabled || !doc.audit.events.empty()) {
    ojson a = ojson::object();
    if (doc.audit.enabled)
      a["enabled"] = *doc.audit.enabled;
    if (!doc.audit.events.empty())
      a["events"] = doc.audit.events;
    out["audit"] = std::move(a);
  }
  const auto& l = doc.limits;
  ojson limits = ojson::object();
  auto put = [&](const char* key, const std::optional<uint64_t>& v) {
    if (v)
      limits[key] = *v;
  };
  put("timeout_ms", l.timeout_ms);
  put("memory_bytes", l.memory_bytes);
  put("pids", l.pids);
  put("cpu_percent", l.cpu_percent);
  put("stdout_bytes", l.stdout_bytes);
  put("stderr_bytes", l.stderr_bytes);
  put("code_bytes", l.code_bytes);
  if (!limits.empty())
    out["limits"] = std::move(limits);
  return out;
}

} // namespace castellan::policy
