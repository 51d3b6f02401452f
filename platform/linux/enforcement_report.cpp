#include "platform/linux/enforcement_report.hpp"

#include <nlohmann/json.hpp>

#include "platform/linux/namespaces.hpp"

namespace castellan::platform {

namespace {

using json = nlohmann::json;

json optional_u64(const std::optional<uint64_t>& v) {
  if (!v)
    return nullptr;
  if (*v == UINT64_MAX)
    return "max";
  return *v;
}

json limits_json(const cgroup_limits& l) {
  return {{"memory_bytes", l.memory_bytes}, {"pids", l.pids}, {"cpu_percent", l.cpu_percent}};
}

json applied_json(const cgroup_applied_limits& l) {
  return {{"memory_bytes", optional_u64(l.memory_bytes)},
          {"memory_swap_bytes", optional_u64(l.memory_swap_bytes)},
          {"pids", optional_u64(l.pids)},
          {"cpu_quota_us", optional_u64(l.cpu_quota_us)},
          {"cpu_period_us", optional_u64(l.cpu_period_us)}};
}

json caps_json(const capabilities_report& c) {
  return {{"effective", capability_names(c.effective)},
          {"permitted", capability_names(c.permitted)},
          {"inheritable", capability_names(c.inheritable)},
          {"ambient", capability_names(c.ambient)},
          {"bounding", capability_names(c.bounding)},
          {"securebits", c.securebits}};
}

} // namespace

std::string enforcement_report::to_json() const {
  json j;
  j["namespaces"] = {{"requested", namespaces_requested}, {"in_force", namespaces_in_force}};
  j["network"] = network;
  j["start"] = start;
  if (!mode.empty())
    j["mode"] = mode;
  if (cgroup)
    j["cgroup"] = {{"controllers", cgroup->controllers},
                   {"requested", limits_json(cgroup->requested)},
                   {"in_force", applied_json(cgroup->in_force)}};
  else if (!cgroup_unavailable.empty())
    j["cgroup"] = {{"in_force", nullptr}, {"best_effort", true},
                   {"unavailable", cgroup_unavailable}};
  else
    j["cgroup"] = nullptr;
  j["root"] = root ? json::parse(root_report_json(*root)) : json(nullptr);
  if (landlock)
    j["landlock"] = {{"requested", landlock_requested},
                     {"abi", landlock->abi},
                     {"enforced", landlock->enforced},
                     {"handled_fs", landlock_fs_names(landlock->handled_fs)},
                     {"handled_net", landlock_net_names(landlock->handled_net)},
                     {"scoped", landlock_scope_names(landlock->scoped)},
                     {"dropped_fs", landlock_fs_names(landlock->dropped_fs)},
                     {"dropped_net", landlock_net_names(landlock->dropped_net)},
                     {"dropped_scoped", landlock_scope_names(landlock->dropped_scoped)},
                     {"path_rules", landlock->path_rules},
                     {"port_rules", landlock->port_rules},
                     {"skipped_paths", landlock->skipped_paths}};
  else
    j["landlock"] = {{"requested", landlock_requested}, {"enforced", false}};
  if (seccomp)
    j["seccomp"] = {{"requested", seccomp_requested},
                    {"enforced", seccomp->enforced},
                    {"mode", seccomp->mode},
                    {"no_new_privs", seccomp->no_new_privs},
                    {"denied", seccomp->denied},
                    {"killed", seccomp->killed},
                    {"arguments", seccomp->arguments},
                    {"not_on_this_arch", seccomp->not_on_this_arch},
                    {"enosys_above_nr", seccomp->highest_allowed_nr}};
  else
    j["seccomp"] = {{"requested", seccomp_requested}, {"enforced", false}};
  j["capabilities"] = capabilities ? caps_json(*capabilities) : json(nullptr);
  return j.dump();
}

std::string root_report_json(const root_report& root) {
  return json{{"mounted", root.mounted},
              {"skipped", root.skipped},
              {"proc", root.proc_options},
              {"read_only", root.read_only},
              {"hostname", root.hostname},
              {"etc", {{"source", root.etc.source},
                       {"entries", root.etc.entries},
                       {"withheld", root.etc.withheld}}},
              {"memfd_noexec", root.memfd_noexec < 0 ? json(nullptr) : json(root.memfd_noexec)}}
    .dump();
}

outcome<root_report> parse_root_report(std::string_view text) {
  try {
    const json j = json::parse(text);
    root_report r;
    r.mounted = j.at("mounted").get<std::vector<std::string>>();
    r.skipped = j.at("skipped").get<std::vector<std::string>>();
    r.proc_options = j.at("proc").get<std::string>();
    r.read_only = j.at("read_only").get<bool>();
    r.hostname = j.at("hostname").get<std::string>();
    if (const auto etc = j.find("etc"); etc != j.end()) {
      r.etc.source = etc->at("source").get<std::string>();
      r.etc.entries = etc->at("entries").get<uint64_t>();
      r.etc.withheld = etc->at("withheld").get<std::vector<std::string>>();
    }
    const json& m = j.at("memfd_noexec");
    r.memfd_noexec = m.is_null() ? -1 : m.get<int>();
    return r;
  } catch (const std::exception& e) {
    return logic_failure(std::string("root report: ") + e.what());
  }
}

outcome<enforcement_report> spawn_enforcement(const worker_spec& spec, pid_t pid) {
  enforcement_report r;
  r.namespaces_requested = namespace_names(spec.namespaces);
  auto in_force = namespaces_of(pid);
  if (!in_force)
    return in_force.error().wrap("enforcement report");
  r.namespaces_in_force = namespace_names(*in_force);
  r.network = in_force->net ? "none (private network namespace, loopback only)" : "host";
  return r;
}

outcome<cgroup_enforcement> cgroup_enforcement_of(const worker_cgroup& cg,
                                                  const cgroup_limits& requested) {
  cgroup_enforcement e;
  e.controllers = cg.describe();
  e.requested = requested;
  auto applied = cg.applied_limits();
  if (!applied)
    return applied.error();
  e.in_force = *applied;
  return e;
}

} // namespace castellan::platform
