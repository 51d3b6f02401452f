#include "actors/pool/policy_tightening.hpp"

#include <sys/utsname.h>

#include <algorithm>
#include <set>

#include <nlohmann/json.hpp>

#include "actors/json_bytes.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/landlock.hpp"
#include "platform/linux/seccomp_export.hpp"

namespace castellan {

namespace {

using names = std::set<std::string>;

names set_of(const std::vector<std::string>& v) {
  return names(v.begin(), v.end());
}

/// The first name of `part` that is in none of `wholes`, or "".
std::string first_missing(const names& part, std::initializer_list<const names*> wholes) {
  for (const auto& n : part)
    if (std::none_of(wholes.begin(), wholes.end(), [&](const names* w) { return w->count(n); }))
      return n;
  return {};
}

std::string rights(uint64_t mask) {
  std::string out;
  for (const auto& n : platform::landlock_fs_names(mask))
    out += (out.empty() ? "" : ",") + n;
  return out;
}

/// Whether `wide` enforces everything `narrow` needs from the worker
/// itself — what no process inside the worker can add: the interpreter,
/// the limits, the masks, the layers, the mounts (with their rights) and
/// the denied calls. The Landlock and seccomp rules of `narrow` are left
/// to the caller: the exec's process can add those.
policy_fit covers(const pool_config& wide, const pool_config& narrow) {
  const auto& w = wide.sandbox;
  const auto& n = narrow.sandbox;
  if (wide.isolation != platform::isolation_mode::namespaces ||
      narrow.isolation != platform::isolation_mode::namespaces)
    return {"only sandboxed workers can be compared"};
  if (wide.python != narrow.python || wide.harness != narrow.harness)
    return {"the interpreter differs"};
  if (wide.limits.memory_bytes != narrow.limits.memory_bytes ||
      wide.limits.pids != narrow.limits.pids ||
      wide.limits.cpu_percent != narrow.limits.cpu_percent)
    return {"the cgroup limits (memory, pids, cpu) differ: they are the worker's"};
  if (wide.stdout_limit != narrow.stdout_limit || wide.stderr_limit != narrow.stderr_limit ||
      wide.code_limit != narrow.code_limit)
    return {"the output or code limits differ"};
  if (w.hostname != n.hostname || w.tmp_size_bytes != n.tmp_size_bytes ||
      w.overlay_writes != n.overlay_writes)
    return {"the root differs (hostname, /tmp size, overlaid writes)"};
  if (w.loopback && !n.loopback)
    return {"the pool's workers have a loopback interface, the request policy's none (it is "
            "the worker's)"};
  if (n.seccomp && !w.seccomp)
    return {"the pool has no seccomp filter"};
  if (n.cgroups && !w.cgroups)
    return {"the pool's workers have no cgroup"};
  if (w.cgroups_best_effort && !n.cgroups_best_effort)
    return {"the pool's cgroup is best effort"};
  if (w.landlock && !n.landlock)
    return {"the request policy switches Landlock off"};
  if (!w.notify.empty() || !n.notify.empty())
    return {"a policy with decided system calls (seccomp notify) needs a pool of its own: the "
            "supervisor performs a decided open itself, outside the exec's Landlock"};
  if (narrow.egress_policy)
    return {"the request policy allows network: the egress proxy decides with the pool's "
            "policy"};
  if (set_of(w.masked_paths) != set_of(n.masked_paths))
    return {"the masked paths differ (masks are mounts of the worker)"};
  for (const auto& e : n.extra_paths) {
    auto it = std::find_if(w.extra_paths.begin(), w.extra_paths.end(),
                           [&](const sandbox_extra_path& x) { return x.path == e.path; });
    if (it == w.extra_paths.end())
      return {"the pool does not bind " + e.path};
    if ((e.landlock_access & ~it->landlock_access) != 0 || (e.writable && !it->writable))
      return {"the request grants more on " + e.path + " (" +
              rights(e.landlock_access & ~it->landlock_access) + ") than the pool"};
  }
  if (w.restrict_execute) {
    if (!n.restrict_execute)
      return {"the request policy allows executing what the pool's does not"};
    const auto allowed = set_of(w.exec_allowed);
    if (auto m = first_missing(set_of(n.exec_allowed), {&allowed}); !m.empty())
      return {"the request policy allows executing " + m + ", the pool's does not"};
  }
  const auto n_deny = set_of(n.deny_syscalls);
  const auto n_kill = set_of(n.kill_syscalls);
  if (auto m = first_missing(set_of(w.deny_syscalls), {&n_deny, &n_kill}); !m.empty())
    return {"the pool denies " + m + ", the request policy does not"};
  if (auto m = first_missing(set_of(w.kill_syscalls), {&n_kill}); !m.empty())
    return {"the pool kills on " + m + ", the request policy does not"};
  return {};
}

std::string machine() {
  utsname u{};
  if (::uname(&u) != 0)
    return {};
  return u.machine;
}

} // namespace

policy_fit same_enforcement(const pool_config& pool, const pool_config& request) {
  if (auto f = covers(pool, request); !f)
    return f;
  if (auto f = covers(request, pool); !f)
    return {"the request policy enforces less: " + f.why_not};
  // Mounts, masks, execution and denied calls are equal both ways; the
  // Landlock rules follow from them, except the rights on each bind.
  for (const auto& e : request.sandbox.extra_paths) {
    auto it = std::find_if(pool.sandbox.extra_paths.begin(), pool.sandbox.extra_paths.end(),
                           [&](const sandbox_extra_path& x) { return x.path == e.path; });
    if (it == pool.sandbox.extra_paths.end() || it->landlock_access != e.landlock_access)
      return {"the rights on " + e.path + " differ"};
  }
  if (pool.egress_policy)
    return {"the pool has network"};
  const auto& p = pool.sandbox;
  const auto& r = request.sandbox;
  if (p.landlock != r.landlock || p.landlock_best_effort != r.landlock_best_effort ||
      p.seccomp != r.seccomp || p.cgroups != r.cgroups ||
      p.cgroups_best_effort != r.cgroups_best_effort)
    return {"the layers differ"};
  // Each tree of the root has the rights its own policy allows there.
  auto pool_spec = make_sandbox_spec(p, pool.harness);
  auto request_spec = make_sandbox_spec(r, request.harness);
  if (!pool_spec || !request_spec)
    return {"the sandbox cannot be described: " +
            (pool_spec ? request_spec.error() : pool_spec.error()).describe()};
  auto rules_of = [](const platform::sandbox_spec& s) {
    std::set<std::pair<std::string, uint64_t>> out;
    for (const auto& rule : s.landlock.paths)
      out.emplace(rule.path, rule.access);
    return out;
  };
  if (rules_of(*pool_spec) != rules_of(*request_spec))
    return {"the file-system rights of the root differ"};
  return {};
}

policy_fit narrows(const pool_config& pool, const pool_config& request) {
  if (pool.mode != exec_mode::isolated)
    return {"the pool runs " + std::string(to_string(pool.mode)) +
            " mode: only a process forked for the exec can be narrowed"};
  if (auto f = covers(pool, request); !f)
    return f;
  if (pool.egress_policy) {
    // The child must take the pool's egress relay away with Landlock TCP
    // rules (ABI 4); without them it would keep the pool's network.
    if (!request.sandbox.landlock)
      return {"the pool has network and the request policy no Landlock to remove it"};
    if (platform::landlock_net_rights_of_abi(platform::landlock_abi()) == 0)
      return {"the pool has network and the kernel's Landlock cannot restrict TCP"};
  }
  return {};
}

outcome<std::string> make_tightening(const pool_config& pool, const pool_config& request,
                                     const std::string& policy_name) {
  nlohmann::json desc = {{"version", 1}, {"policy", policy_name}, {"arch", machine()}};
  // Landlock: the rules the request policy's own workers would get; the
  // kernel intersects them with the pool's.
  desc["landlock"] = nullptr;
  if (request.sandbox.landlock) {
    auto spec = make_sandbox_spec(request.sandbox, request.harness);
    if (!spec)
      return spec.error().wrap("tightening");
    const auto& l = spec->landlock;
    nlohmann::json paths = nlohmann::json::array();
    for (const auto& rule : l.paths)
      paths.push_back({{"path", rule.path}, {"access", rule.access}, {"optional", rule.optional}});
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& rule : l.ports)
      ports.push_back({{"port", rule.port}, {"access", rule.access}});
    desc["landlock"] = {
        {"best_effort", l.best_effort}, {"require_net", pool.egress_policy != nullptr},
        {"handled_fs", l.handled_fs},   {"handled_net", l.handled_net},
        {"scoped", l.scoped},           {"paths", std::move(paths)},
        {"ports", std::move(ports)}};
  }
  // seccomp: only what the pool's filter does not already do.
  desc["seccomp"] = nullptr;
  if (request.sandbox.seccomp) {
    const auto pool_deny = set_of(pool.sandbox.deny_syscalls);
    const auto pool_kill = set_of(pool.sandbox.kill_syscalls);
    std::vector<std::string> deny;
    std::vector<std::string> kill;
    for (const auto& n : request.sandbox.kill_syscalls)
      if (!pool_kill.count(n))
        kill.push_back(n);
    for (const auto& n : request.sandbox.deny_syscalls)
      if (!pool_deny.count(n) && !pool_kill.count(n))
        deny.push_back(n);
    if (!deny.empty() || !kill.empty()) {
      auto filter = platform::export_seccomp_filter(deny, kill);
      if (!filter)
        return filter.error().wrap("tightening");
      desc["seccomp"] = {{"program", base64_encode(filter->program)},
                         {"denied", filter->denied},
                         {"killed", filter->killed}};
    }
  }
  return desc.dump();
}

} // namespace castellan
