#pragma once

/// @file worker_spec.hpp
/// Everything needed to start one worker process: what to run, which fds it
/// inherits, and the isolation it must get. The pool fills it in; a platform
/// backend (`spawn_worker`) carries it out or refuses — it never starts a
/// worker with less isolation than the spec asks for.

#include <cstdint>
#include <string>
#include <vector>

namespace castellan::platform {

/// Which namespaces the worker gets (CLONE_NEW* flags).
struct namespace_set {
  bool user = false;
  bool pid = false;
  bool mount = false;
  bool net = false;
  bool ipc = false;
  bool uts = false;
  bool cgroup = false;

  bool any() const noexcept { return user || pid || mount || net || ipc || uts || cgroup; }
};

/// One entry of the worker's root file system, built by castellan-worker.
struct mount_entry {
  enum class kind : uint8_t { bind, tmpfs, proc, dev_minimal };
  kind what = kind::bind;
  std::string source; ///< host path (bind only)
  std::string target; ///< path inside the sandbox
  bool read_only = true;
  uint64_t size_bytes = 0; ///< tmpfs size limit, 0 = the kernel's default
};

/// Per-worker resource limits (0 = no limit).
struct resource_limits {
  uint64_t memory_bytes = 0;
  uint32_t pids = 0;
  uint32_t cpu_percent = 0; ///< of one core
};

/// `parent_fd` in the supervisor becomes `child_fd` in the worker.
struct fd_mapping {
  int parent_fd = -1;
  int child_fd = -1;
};

enum class isolation_mode : uint8_t {
  none,       ///< a plain child process (the portable backend, development)
  namespaces, ///< the Linux sandbox: the namespaces, mounts and limits below
};

struct worker_spec {
  std::string executable;        ///< absolute path, executed directly (no PATH search)
  std::vector<std::string> argv; ///< argv[0] included
  std::vector<std::string> env;  ///< the complete environment ("K=V"); nothing is inherited
  std::vector<fd_mapping> fds;   ///< every other fd is closed in the child
  isolation_mode isolation = isolation_mode::none;
  namespace_set namespaces;
  std::vector<mount_entry> mounts;
  std::string hostname;
  resource_limits limits;
  std::string policy_json;     ///< the policy the worker applies to itself (Landlock, seccomp)
  bool die_with_parent = true; ///< PR_SET_PDEATHSIG(SIGKILL)
};

} // namespace castellan::platform
