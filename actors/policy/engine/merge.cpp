#include "actors/policy/engine/merge.hpp"

#include <algorithm>
#include <set>
#include <string>

namespace castellan::policy {

namespace {

void merge_plugin(std::optional<plugin_setting>& into, const std::optional<plugin_setting>& from) {
  if (!from)
    return;
  if (!into) {
    into = from;
    return;
  }
  into->enabled = into->enabled || from->enabled;
  into->best_effort = into->best_effort && from->best_effort;
  into->object_form = into->object_form || from->object_form;
}

void merge_action(std::optional<action>& into, const std::optional<action>& from) {
  if (!from)
    return;
  into = into ? most_restrictive(*into, *from) : *from;
}

void merge_min(std::optional<uint64_t>& into, const std::optional<uint64_t>& from) {
  if (!from)
    return;
  into = into ? std::min(*into, *from) : *from;
}

// Appends the items of `from` not yet in `seen` (which mirrors `into`).
void union_into(std::vector<std::string>& into, std::set<std::string>& seen,
                const std::vector<std::string>& from) {
  for (const auto& x : from)
    if (seen.insert(x).second)
      into.push_back(x);
}

// Union of host patterns with their origins kept in step.
void union_hosts(std::vector<std::string>& into, std::vector<std::string>& into_origins,
                 std::set<std::string>& seen, const std::vector<std::string>& from,
                 const std::vector<std::string>& from_origins) {
  for (size_t i = 0; i < from.size(); ++i) {
    if (!seen.insert(from[i]).second)
      continue;
    into.push_back(from[i]);
    into_origins.push_back(i < from_origins.size() ? from_origins[i] : std::string{});
  }
}

} // namespace

policy_document merge_policies(const std::vector<policy_document>& layers) {
  policy_document out;
  std::set<std::string> seen_deny_hosts, seen_allow_hosts, seen_syscalls, seen_events;
  for (const auto& l : layers) {
    if (!l.description.empty())
      out.description = l.description;
    out.source = l.source;
    merge_plugin(out.plugins.namespaces, l.plugins.namespaces);
    merge_plugin(out.plugins.landlock, l.plugins.landlock);
    merge_plugin(out.plugins.seccomp, l.plugins.seccomp);
    merge_plugin(out.plugins.cgroups, l.plugins.cgroups);
    merge_action(out.defaults.fs, l.defaults.fs);
    merge_action(out.defaults.net, l.defaults.net);
    merge_action(out.defaults.exec, l.defaults.exec);
    out.fs_rules.insert(out.fs_rules.end(), l.fs_rules.begin(), l.fs_rules.end());
    out.net_rules.insert(out.net_rules.end(), l.net_rules.begin(), l.net_rules.end());
    out.exec_rules.insert(out.exec_rules.end(), l.exec_rules.begin(), l.exec_rules.end());
    union_hosts(out.hosts.deny, out.hosts.deny_origins, seen_deny_hosts, l.hosts.deny,
                l.hosts.deny_origins);
    if (l.hosts.allow) {
      if (!out.hosts.allow)
        out.hosts.allow.emplace();
      union_hosts(*out.hosts.allow, out.hosts.allow_origins, seen_allow_hosts, *l.hosts.allow,
                  l.hosts.allow_origins);
    }
    union_into(out.deny_syscalls, seen_syscalls, l.deny_syscalls);
    if (l.audit.enabled)
      out.audit.enabled = out.audit.enabled.value_or(false) || *l.audit.enabled;
    union_into(out.audit.events, seen_events, l.audit.events);
    merge_min(out.limits.timeout_ms, l.limits.timeout_ms);
    merge_min(out.limits.memory_bytes, l.limits.memory_bytes);
    merge_min(out.limits.pids, l.limits.pids);
    merge_min(out.limits.cpu_percent, l.limits.cpu_percent);
    merge_min(out.limits.stdout_bytes, l.limits.stdout_bytes);
    merge_min(out.limits.stderr_bytes, l.limits.stderr_bytes);
    merge_min(out.limits.code_bytes, l.limits.code_bytes);
  }
  return out;
}

} // namespace castellan::policy
