#include "actors/pool/sandbox_profile.hpp"

#include <errno.h>
#include <glob.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_document.hpp"
#include "actors/pool/sandbox_net_rights.hpp"
#include "actors/mediation/notify_mapping.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"

namespace castellan {

namespace {

std::string dir_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos || pos == 0 ? std::string("/") : path.substr(0, pos);
}

std::string base_of(const std::string& path) {
  const auto pos = path.find_last_of('/');
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

} // namespace

bool in_default_root(const std::string& path) {
  for (const char* top : {"/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin",
                          "/etc", "/dev", "/proc", "/tmp", "/sys", "/"}) {
    const std::string t = top;
    if (path == t || (t != "/" && path.rfind(t + "/", 0) == 0))
      return true;
  }
  return false;
}

namespace {

/// What `name` runs as when the harness looks it up the way execvp does
/// (the worker's PATH); `name` itself when it has a slash.
std::string resolve_program(const std::string& name) {
  if (name.find('/') != std::string::npos)
    return name;
  for (const char* dir : {"/usr/local/bin", "/usr/bin", "/bin"}) {
    const std::string p = std::string(dir) + "/" + name;
    if (::access(p.c_str(), F_OK) == 0)
      return p;
  }
  return {};
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

/// The host has `prog` (an absolute path) that the sandbox did not find.
std::string explain_missing_program(const std::string& prog) {
  struct stat st;
  if (prog.empty() || prog.front() != '/' || ::stat(prog.c_str(), &st) != 0)
    return {};
  std::string why = prog + " is on this host but not inside the sandbox, which sees only its "
                           "own root; an fs allow rule in the policy binds a host directory";
  if (in_default_root(prog))
    why += ", but not one inside the sandbox's default root (/usr, /etc, /tmp, …): rules "
           "there speak of the sandbox's own paths and bind nothing";
  return why;
}

const char* const exec_rule = "policy exec default deny (/defaults/exec)";

bool restricts_exec(const sandbox_profile& profile) {
  return profile.restrict_execute && profile.landlock;
}

} // namespace

std::string explain_exec_error(const std::vector<std::string>& argv,
                               const harness_exec_error& error, const sandbox_profile& profile) {
  // The worker names the program; the pool looks up only what the request
  // itself asked to run, never a host path a worker chose.
  if (argv.empty() || error.program != argv.front())
    return {};
  const std::string& prog = argv.front();
  if (error.error_number == ENOENT)
    return explain_missing_program(prog);
  if (error.error_number != EACCES || !restricts_exec(profile))
    return {};
  const std::string path = resolve_program(prog);
  if (path.empty())
    return {};
  if (std::find(profile.exec_allowed.begin(), profile.exec_allowed.end(), path) !=
      profile.exec_allowed.end())
    return {}; // allowed by the exec rules: refused for another reason
  return "exec of " + path + " refused: " + exec_rule +
         "; allowed: " + joined(profile.exec_allowed);
}

std::string explain_nested_refused_exec(const std::vector<std::string>& argv, int exit_code,
                                        const std::string& stderr_data,
                                        const sandbox_profile& profile) {
  if (argv.empty() || exit_code != 126 || !restricts_exec(profile) ||
      stderr_data.find(": Permission denied\n") == std::string::npos)
    return {};
  return "exit 126 after a \"Permission denied\": if " + argv.front() +
         " tried to start another program, the " + exec_rule +
         " refuses every program but those its rules allow (Landlock answers such an "
         "execve with EACCES and names no file); allowed: " +
         joined(profile.exec_allowed);
}

namespace {

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

std::string sandboxed_harness_path(const std::string& harness) {
  return std::string(sandbox_harness_dir) + "/" + base_of(harness);
}

outcome<platform::sandbox_spec> make_sandbox_spec(const sandbox_profile& profile,
                                                  const std::string& harness) {
  if (harness.empty() || harness.front() != '/')
    return logic_failure("sandbox: the harness path '" + harness + "' is not absolute");
  platform::default_root_options options;
  options.hostname = profile.hostname;
  options.tmp_size_bytes = profile.tmp_size_bytes;
  platform::sandbox_spec spec;
  spec.root = platform::default_root_spec(options);
  platform::bind_mount h;
  h.source = dir_of(harness);
  h.target = sandbox_harness_dir;
  h.writable = false;
  h.exec = false;
  h.captured_by_spawner = true;
  spec.root.binds.push_back(std::move(h));
  for (const auto& e : profile.extra_paths) {
    platform::bind_mount b;
    b.source = e.path;
    b.target = e.path;
    b.writable = e.writable;
    b.exec = (e.landlock_access & platform::landlock_fs::execute) != 0;
    b.captured_by_spawner = true;
    spec.root.binds.push_back(std::move(b));
  }
  // The default root's own masks (secrets inside the /etc it shows) stay.
  for (const auto& m : profile.masked_paths)
    if (std::find(spec.root.masked.begin(), spec.root.masked.end(), m) == spec.root.masked.end())
      spec.root.masked.push_back(m);
  if (auto ok = platform::validate(spec.root); !ok)
    return ok.error().wrap("sandbox");
  spec.landlock = platform::default_landlock_spec(spec.root);
  for (auto& rule : spec.landlock.paths) {
    for (const auto& e : profile.extra_paths)
      if (rule.path == e.path)
        rule.access &= e.landlock_access;
  }
  if (profile.fs_policy)
    limit_landlock_to_policy(spec, *profile.fs_policy);
  if (profile.restrict_execute) {
    for (auto& rule : spec.landlock.paths)
      rule.access &= ~platform::landlock_fs::execute;
    const uint64_t run = platform::landlock_fs::execute | platform::landlock_fs::read_file;
    for (const auto& path : profile.exec_allowed)
      spec.landlock.paths.push_back({path, run, true});
  }
  spec.landlock.enabled = profile.landlock;
  spec.landlock.best_effort = profile.landlock_best_effort;
  // A memfd is no path Landlock can withhold EXECUTE from, and no mount's
  // noexec reaches it: where only the allowed programs may run, no memfd
  // may be executable (vm.memfd_noexec = 2), on the exec layer's terms.
  spec.memfd_noexec.required = profile.restrict_execute && profile.landlock;
  spec.memfd_noexec.best_effort = profile.landlock_best_effort;
  spec.loopback_up = profile.loopback;
  spec.seccomp.enabled = profile.seccomp;
  spec.seccomp.deny = profile.deny_syscalls;
  spec.seccomp.kill = profile.kill_syscalls;
  spec.notify = profile.notify;
  return spec;
}

} // namespace castellan
