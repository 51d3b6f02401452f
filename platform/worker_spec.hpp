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

/// How ids inside the worker's user namespace map to the host. The worker
/// runs as one fixed unprivileged id inside; on the host it is `outside_*`.
/// Mapping anything to host root (0) is refused.
struct id_mapping {
  /// `outside_uid`/`outside_gid` value meaning: the supervisor's own id when
  /// it is not root, 65534 (nobody) when it is.
  static constexpr int64_t automatic = -1;

  uint32_t inside_uid = 1000;
  uint32_t inside_gid = 1000;
  int64_t outside_uid = automatic;
  int64_t outside_gid = automatic;
};

/// The cgroups the worker is placed in before it runs anything. The caller
/// creates them (platform/linux/cgroups.hpp: `worker_cgroup`) and owns their
/// removal; spawn_worker only puts the child in.
struct cgroup_placement {
  /// Directories whose cgroup.procs receives the child's pid before it is
  /// released (cgroup v1: one per hierarchy; v2: the one directory).
  std::vector<std::string> directories;
  /// A cgroup v2 directory to clone the child straight into
  /// (CLONE_INTO_CGROUP: no window outside its limits). Empty = none.
  std::string clone_into;

  bool empty() const noexcept { return directories.empty() && clone_into.empty(); }
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
  bool die_with_parent = true; ///< PR_SET_PDEATHSIG(SIGKILL)

  // --- isolation_mode::namespaces only ------------------------------------
  id_mapping ids;          ///< user namespace id maps (namespaces.user is required)
  cgroup_placement cgroup; ///< required when any of `limits` is set
  /// The executable keeps CAP_SYS_ADMIN, CAP_SETPCAP and CAP_NET_ADMIN in its
  /// own user namespace (as ambient capabilities) so that, as PID 1, it can
  /// build its root; it must drop them before it runs untrusted code.
  /// false = it starts with no capabilities at all.
  bool setup_capabilities = true;
  /// vm.memfd_noexec = 2 in the worker's pid namespace: no memfd can be
  /// created executable (MFD_EXEC is refused, every other one is sealed
  /// against exec). The kernel takes the write only from a process with the
  /// host's root uid, so the worker's first process writes it while it still
  /// has the supervisor's credentials; a supervisor that is not root cannot.
  /// castellan-worker reads the value back (sandbox_spec::memfd_noexec).
  bool memfd_noexec = false;
};

} // namespace castellan::platform
