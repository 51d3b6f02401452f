#pragma once

/// @file worker_kill.hpp
/// Ending a whole worker at once: every process of its sandbox, however it
/// forked, left the process group or blocked signals. Three independent
/// mechanisms, each enough on its own for what it covers:
///
///  - the worker's cgroup: cgroup.kill on v2; on v1 freeze + SIGKILL of
///    every task in cgroup.procs + thaw (worker_cgroup::signal_all);
///  - SIGKILL through the pidfd of the worker process, which is the init of
///    its pid namespace when sandboxed: the kernel then kills every process
///    in that namespace (the backstop when a cgroup is missing);
///  - SIGKILL to its process group (the only reach an unsandboxed worker has).
///
/// When the init owns a pid namespace, it is signalled first: from the
/// moment it starts to exit the kernel allocates no more pids in that
/// namespace, so no fork can outrun the kill, and the cgroup pass that
/// follows needs no freezer (which costs milliseconds per kill on v1).
///
/// Nothing here waits for a process to die: the caller learns of the exit
/// through the pidfd, so the function is safe on a thread that must not block.

#include <sys/types.h>

#include <cstddef>
#include <string>

namespace castellan::platform {

class worker_cgroup;

/// What to kill. Any part may be absent.
struct worker_kill_target {
  int init_pidfd = -1;        ///< pidfd of the worker process (-1: none)
  /// The worker process is the init of a pid namespace that holds every
  /// other process of the worker (a sandboxed worker).
  bool init_owns_pid_namespace = false;
  pid_t process_group = 0;    ///< its process group (0: do not signal a group)
  worker_cgroup* cgroup = nullptr;
};

/// What kill_worker_tree did, for logs and the exec's detail.
struct worker_kill_report {
  bool init_signalled = false;
  bool group_signalled = false;
  const char* cgroup_method = "none"; ///< see worker_cgroup::signal_pass
  std::size_t cgroup_tasks = 0;
  std::string cgroup_error;           ///< why the cgroup pass failed, if it did

  /// "cgroup.kill + pid-namespace init", "freezer (5 tasks) + …".
  std::string describe() const;
};

/// Sends SIGKILL to everything `target` names: the namespace's init first
/// when there is one (then the cgroup, without freezing), else the cgroup
/// first (frozen on v1, so that nothing forks past the pass) and the
/// process.
worker_kill_report kill_worker_tree(const worker_kill_target& target) noexcept;

} // namespace castellan::platform
