#pragma once

/// @file sandbox_profile.hpp
/// What a pool's workers get inside their sandbox, in policy terms (layers,
/// extra paths, denied system calls), and its translation into the
/// worker-side sandbox spec (platform/linux/sandbox_spec.hpp). CAF-free.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "actors/mediation/sandbox_fixed_paths.hpp"
#include "actors/pool/harness_exec_error.hpp"
#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/sandbox_spec.hpp"

namespace castellan {

namespace policy {
struct policy_document;
class compiled_policy;
} // namespace policy

struct pool_config;

/// A host path the policy grants, bound at the same path inside.
struct sandbox_extra_path {
  std::string path;
  bool writable = false;
  uint64_t landlock_access = 0; ///< platform::landlock_fs bits (the policy's perms)
};

struct sandbox_profile {
  bool landlock = true;             ///< apply Landlock to the interpreter
  bool landlock_best_effort = true; ///< a kernel without (some of) Landlock runs with less
  bool seccomp = true;              ///< apply the seccomp filter (never best effort)
  bool cgroups = true;              ///< a cgroup per worker with the pool's limits
  /// A worker starts without its cgroup when one cannot be created (the
  /// report says why); false: the worker is refused instead.
  bool cgroups_best_effort = false;
  std::vector<std::string> deny_syscalls; ///< EPERM, beyond the anti-escape set
  std::vector<std::string> kill_syscalls; ///< SIGSYS
  std::vector<sandbox_extra_path> extra_paths; ///< bound at the same path, Landlock as given
  /// Paths the policy denies to read: covered inside the root so that they
  /// cannot be read even below a directory the sandbox binds (Landlock can
  /// only grant, never carve a hole out of a grant).
  std::vector<std::string> masked_paths;
  /// When true, Landlock EXECUTE is granted only on `exec_allowed` (and the
  /// dynamic loader), nowhere else; false: on every read-only system bind.
  bool restrict_execute = false;
  std::vector<std::string> exec_allowed; ///< paths inside the sandbox (globs expanded on the host)
  /// System calls the supervisor decides through seccomp user
  /// notification (notify_spec_for(policy); empty: none, no cost).
  platform::notify_spec notify;
  /// The loopback interface is brought up (loopback_for(policy) in
  /// sandbox_net_rights.hpp): false leaves the sandbox without any network,
  /// even to itself.
  bool loopback = true;
  std::string hostname = "castellan";
  uint64_t tmp_size_bytes = 64ull << 20;
  /// A host directory bound read-write (noexec) at /workspace, and the
  /// workers' working directory: a workspace's mount
  /// (workspace_lease::host_path, actors/session/workspace_store.hpp).
  /// Landlock grants its code read and write there unless a rule of the
  /// policy denies them at /workspace (base_grants_for in
  /// sandbox_fs_rights.hpp). Empty: no /workspace.
  std::string workspace_source;
  /// When set, what is bound at /workspace: the root of the workspace's
  /// mount as its store opened and checked it (workspace_lease::root), and
  /// `workspace_source` only names it. The spawner clones this fd, so no
  /// path is resolved again at spawn: an unmount, a rename or a symlink
  /// since the check changes nothing of what a sandbox gets (and a bare
  /// mount point directory, with no quota, is never bound in its place).
  /// Local to this process (not part of a pool_spec).
  std::shared_ptr<const unique_fd> workspace_root;
  /// The host paths the policy makes writable (extra_paths) are overlaid:
  /// the workers see them writable, but their writes land in an upper layer
  /// of the sandbox's own (a tmpfs of tmp_size_bytes, all of them together)
  /// and vanish with the worker; the host's files are never written. What
  /// sessions run with (session_worker_config): only /workspace keeps what a
  /// session writes.
  bool overlay_writes = false;
  /// The policy whose fs decisions limit the Landlock rights of every tree
  /// of the root (limit_landlock_to_policy in sandbox_fs_rights.hpp); null:
  /// the root's own rights (a pool without a policy).
  std::shared_ptr<const policy::compiled_policy> fs_policy;
};

/// The worker-side spec for one worker: the default root (system dirs
/// read-only, curated /etc, tmpfs /tmp, minimal /dev, fresh /proc, loopback
/// only), the directory of `harness` bound read-only at sandbox_harness_dir,
/// the workspace at /workspace (when the profile has one), the profile's
/// extra paths, Landlock rules matching the mounts, each
/// limited to what the profile's fs policy allows at its path, and the
/// seccomp filter with the profile's denials.
outcome<platform::sandbox_spec> make_sandbox_spec(const sandbox_profile& profile,
                                                  const std::string& harness);

/// (apply_policy, what a policy makes of a pool, is in pool_policy.hpp.)

/// True when an fs rule on `path` (a pattern) is inside what the default
/// root already provides (/usr, /etc, /tmp, /dev, … or "/" itself): such a
/// rule changes Landlock rights, it never binds a host path.
bool in_default_root(const std::string& path);

/// For a command whose program the harness could not start (RESULT's
/// `exec_error`, docs/wire.md): why, when the pool can tell.
/// - not found (ENOENT), a program this host has: the sandbox does not see
///   it, and what would change that;
/// - refused (EACCES) under exec rules that restrict what may run (Landlock
///   refuses an execve of anything else with EACCES, and says nothing
///   more): "exec of /usr/bin/id refused: " and the rule.
/// Empty for anything else, and when the error's program is not the
/// request's `argv[0]` (the paths looked up are always the request's own).
std::string explain_exec_error(const std::vector<std::string>& argv,
                               const harness_exec_error& error, const sandbox_profile& profile);

/// For a command that started and ended 126 ("cannot execute") after a
/// "Permission denied" on its stderr, under exec rules that restrict what
/// may run: a hint that a program it tried to start may have been refused
/// by the rules (the file is not known, and the detail says so). Only for
/// a command whose RESULT has no `exec_error` (the harness started the
/// program); the stderr text is the program's, never a contract. Empty for
/// anything else (no restriction, no such line).
std::string explain_nested_refused_exec(const std::vector<std::string>& argv, int exit_code,
                                        const std::string& stderr_data,
                                        const sandbox_profile& profile);

/// The harness's path inside the sandbox.
std::string sandboxed_harness_path(const std::string& harness);

} // namespace castellan
