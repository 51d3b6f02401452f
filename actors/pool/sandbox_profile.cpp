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
#include "platform/linux/mount_table.hpp"

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
  options.workspace_source = profile.workspace_source;
  platform::sandbox_spec spec;
  spec.root = platform::default_root_spec(options);
  spec.root.overlay_size_bytes = profile.tmp_size_bytes;
  for (auto& b : spec.root.binds)
    if (b.target == sandbox_workspace_dir) {
      // The store's directories are closed to the sandbox's host uid: the
      // pool captures the mount and hands it over. Code written there is
      // data, never run (like /tmp).
      b.exec = false;
      b.captured_by_spawner = true;
      if (profile.workspace_root && *profile.workspace_root)
        b.spawner_fd = profile.workspace_root->get();
    }
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
    b.overlay = e.writable && profile.overlay_writes;
    if (b.overlay) {
      // The worker refuses to overlay a directory with mounts below it
      // (root_builder.cpp says why); said here first, with the reason,
      // where the client gets it.
      if (auto below = platform::mounts_at_or_below(e.path); below) {
        std::string covered;
        for (const auto& m : *below)
          if (m.mount_point != e.path)
            covered += (covered.empty() ? "" : ", ") + m.mount_point;
        if (!covered.empty())
          return logic_failure("sandbox: the host directory " + e.path +
                               ", which the policy makes writable, has mounts below it (" +
                               covered + "): a session cannot overlay it (its overlay would "
                               "show what they cover); grant write below them instead");
      }
    }
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
