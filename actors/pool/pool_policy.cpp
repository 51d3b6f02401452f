#include "actors/pool/pool_policy.hpp"

#include <glob.h>
#include <sys/stat.h>

#include <algorithm>

#include "actors/mediation/notify_mapping.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_document.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "actors/pool/sandbox_profile.hpp"

namespace castellan {

namespace {

/// The last component of `path`.
std::string base_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

bool has_glob(const std::string& p) {
  return p.find_first_of("*?[") != std::string::npos;
}

/// Host paths matching `pattern` ("**" treated as "*": one level).
std::vector<std::string> expand(const std::string& pattern) {
  if (!has_glob(pattern))
    return {pattern};
  std::string p = pattern;
  for (auto pos = p.find("**"); pos != std::string::npos; pos = p.find("**"))
    p.replace(pos, 2, "*");
  std::vector<std::string> out;
  glob_t g{};
  if (::glob(p.c_str(), GLOB_NOSORT, nullptr, &g) == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i)
      out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  return out;
}

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

} // namespace


outcome<void> apply_policy(const policy::policy_document& doc, pool_config& cfg) {
  // Named as its file is (without ".json"); decisions and audit use the name.
  std::string name = base_of(doc.source);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0)
    name.resize(name.size() - 5);
  auto compiled = policy::compiled_policy::compile(doc, name.empty() ? cfg.policy_name : name);
  const bool mediated = !notify_spec_for(doc).empty();
  if (auto ok = apply_policy(compiled, cfg); !ok)
    return ok;
  // A policy the supervisor decides nothing for keeps the caller's name.
  if (mediated)
    cfg.policy_name = compiled->name();
  return {};
}

outcome<void> apply_policy(const std::shared_ptr<const policy::compiled_policy>& compiled,
                           pool_config& cfg) {
  const auto& doc = compiled->document();
  const std::string what = "policy " + doc.source;
  auto& sb = cfg.sandbox;
  if (doc.plugins.namespaces && !doc.plugins.namespaces->enabled)
    cfg.isolation = platform::isolation_mode::none;
  if (doc.plugins.landlock) {
    sb.landlock = doc.plugins.landlock->enabled;
    sb.landlock_best_effort = doc.plugins.landlock->best_effort;
  }
  if (doc.plugins.seccomp)
    sb.seccomp = doc.plugins.seccomp->enabled;
  if (doc.plugins.cgroups) {
    sb.cgroups = doc.plugins.cgroups->enabled;
    sb.cgroups_best_effort = doc.plugins.cgroups->best_effort;
  }
  for (const auto& name : doc.deny_syscalls)
    // clone3 is already answered ENOSYS by the anti-escape filter (its flags
    // are out of the filter's sight, so libc falls back to clone, whose
    // CLONE_NEW* flags are denied). EPERM instead would stop libc from
    // falling back: no thread could start at all.
    if (name != "clone3" &&
        std::find(sb.deny_syscalls.begin(), sb.deny_syscalls.end(), name) ==
          sb.deny_syscalls.end())
      sb.deny_syscalls.push_back(name);

  // fs: every tree of the root gets the rights the policy allows there.
  sb.fs_policy = compiled;
  // fs: allow rules outside the default root become binds with their rights.
  for (const auto& rule : doc.fs_rules) {
    if (rule.verdict == policy::action::deny || in_default_root(rule.path))
      continue;
    const uint64_t writes = platform::landlock_fs::write_file | platform::landlock_fs::make_reg |
                            platform::landlock_fs::make_dir | platform::landlock_fs::remove_file |
                            platform::landlock_fs::remove_dir | platform::landlock_fs::truncate;
    for (const auto& path : expand(rule.path)) {
      if (!exists(path))
        continue; // nothing to bind; Landlock denies it anyway
      sandbox_extra_path e;
      e.path = path;
      e.landlock_access = rule.perms;
      e.writable = (rule.perms & writes) != 0;
      sb.extra_paths.push_back(std::move(e));
    }
  }

  // fs deny rules on reading: covered in the root (deny beats any allow, so
  // nothing beneath may be read either). Patterns are expanded on the host;
  // a trailing "/**" adds nothing to what a rule covers. Other "**" patterns
  // cannot be enumerated up front and stay with the policy check alone.
  const uint64_t reads = platform::landlock_fs::read_file | platform::landlock_fs::read_dir;
  for (const auto& rule : doc.fs_rules) {
    if (rule.verdict != policy::action::deny || (rule.perms & reads) == 0)
      continue;
    std::string pattern = rule.path;
    while (pattern.size() > 3 && pattern.compare(pattern.size() - 3, 3, "/**") == 0)
      pattern.resize(pattern.size() - 3);
    if (pattern == "/" || pattern.find("**") != std::string::npos)
      continue;
    for (const auto& path : expand(pattern))
      if (std::find(sb.masked_paths.begin(), sb.masked_paths.end(), path) ==
          sb.masked_paths.end())
        sb.masked_paths.push_back(path);
  }

  // exec: EXECUTE only on the allowed programs, the interpreter, the loader.
  if (doc.effective_exec_default() == policy::action::deny) {
    sb.restrict_execute = true;
    auto allow = [&](const std::string& path) {
      if (std::find(sb.exec_allowed.begin(), sb.exec_allowed.end(), path) ==
          sb.exec_allowed.end())
        sb.exec_allowed.push_back(path);
    };
    allow(cfg.python);
    for (const auto& rule : doc.exec_rules)
      if (rule.verdict != policy::action::deny)
        for (const auto& path : expand(rule.path))
          allow(path);
    // The kernel opens the ELF interpreter for execution too.
    for (const auto& loader : elf_loaders())
      if (exists(loader))
        allow(loader);
  }

  // net: a policy that can allow any TCP connection gets the egress relay
  // and proxy; the proxy decides each connection with this compiled copy.
  if (allows_network(doc))
    cfg.egress_policy = compiled;
  // A policy that denies everything on the sandbox's own addresses gets no
  // loopback at all (sandbox_net_rights.hpp).
  sb.loopback = loopback_for(doc);
  // Decisions the static layers cannot take: seccomp user notification,
  // decided by the pool's event source with this policy compiled.
  sb.notify = notify_spec_for(doc);
  if (!sb.notify.empty())
    cfg.mediation_policy = compiled;

  // limits
  const auto& l = doc.limits;
  if (l.memory_bytes)
    cfg.limits.memory_bytes = *l.memory_bytes;
  if (l.pids) {
    if (*l.pids > UINT32_MAX)
      return logic_failure(what + ": limits.pids " + std::to_string(*l.pids) + " is too large");
    cfg.limits.pids = static_cast<uint32_t>(*l.pids);
  }
  if (l.cpu_percent) {
    if (*l.cpu_percent > UINT32_MAX)
      return logic_failure(what + ": limits.cpu_percent is too large");
    cfg.limits.cpu_percent = static_cast<uint32_t>(*l.cpu_percent);
  }
  if (l.timeout_ms)
    cfg.default_timeout_ms = *l.timeout_ms;
  if (l.stdout_bytes)
    cfg.stdout_limit = *l.stdout_bytes;
  if (l.stderr_bytes)
    cfg.stderr_limit = *l.stderr_bytes;
  if (l.code_bytes) {
    cfg.code_limit = *l.code_bytes;
    // The code travels in one frame: the ring must hold it.
    while (cfg.code_limit + 64 > cfg.ring_capacity && cfg.ring_capacity < (64u << 20))
      cfg.ring_capacity <<= 1;
  }
  return {};
}

outcome<pool_config> pool_config_under(const pool_config& base,
                                       const std::shared_ptr<const policy::compiled_policy>& policy) {
  pool_config cfg = base;
  if (!policy)
    return cfg;
  cfg.policy = policy;
  cfg.policy_name = policy->name();
  if (auto ok = apply_policy(policy, cfg); !ok)
    return ok.error().wrap("pool " + base.name);
  return cfg;
}

pool_config pool_without_policy(const pool_config& pool) {
  pool_config t = pool;
  sandbox_profile fresh;
  const auto& d = pool.sandbox;
  fresh.landlock = d.landlock;
  fresh.landlock_best_effort = d.landlock_best_effort;
  fresh.seccomp = d.seccomp;
  fresh.cgroups = d.cgroups;
  fresh.cgroups_best_effort = d.cgroups_best_effort;
  fresh.hostname = d.hostname;
  fresh.tmp_size_bytes = d.tmp_size_bytes;
  fresh.workspace_source = d.workspace_source; // the pool's, not the policy's
  fresh.workspace_root = d.workspace_root;
  fresh.overlay_writes = d.overlay_writes;
  t.sandbox = std::move(fresh);
  t.egress_policy = nullptr;
  t.mediation_policy = nullptr;
  t.proxy = nullptr;
  t.policy = nullptr;
  t.policies = nullptr;
  t.named_policy.clear();
  t.name.clear();
  t.policy_name.clear();
  return t;
}

void allow_program_to_run(pool_config& cfg, const std::string& program) {
  if (!cfg.sandbox.restrict_execute)
    return;
  if (program.find('/') != std::string::npos)
    cfg.sandbox.exec_allowed.push_back(program);
  else
    for (const char* dir : {"/usr/local/bin/", "/usr/bin/", "/bin/"})
      cfg.sandbox.exec_allowed.push_back(dir + program);
}

} // namespace castellan
