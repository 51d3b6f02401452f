#pragma once

/// @file cgroups.hpp
/// Per-worker cgroups on cgroup v2, or v1 where v2 lacks a controller.
///
/// `cgroup_layout::detect()` finds, for each controller castellan uses, the
/// hierarchy that has it and this process's own cgroup there. A
/// `worker_cgroup` is created *below* that own cgroup in every hierarchy it
/// needs (never anywhere else), gets its limits written and read back, takes
/// pids, reports usage, kills every task, and is removed by its destructor.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

enum class cgroup_version : uint8_t { v1, v2 };

const char* to_string(cgroup_version v) noexcept;

/// Where one controller lives for this process.
struct cgroup_controller {
  std::string name;        ///< "memory", "pids", "cpu", "cpuacct", "freezer"
  cgroup_version version = cgroup_version::v1;
  std::string own_dir;     ///< absolute directory of this process's own cgroup there
};

/// The controllers this process can use, and where.
class cgroup_layout {
public:
  /// Reads /proc/self/mountinfo, /proc/self/cgroup and, for v2, the own
  /// cgroup's cgroup.controllers. A controller on v2 (when v2 has it) is
  /// preferred to the same controller on v1.
  static outcome<cgroup_layout> detect();

  /// The same from given texts; `v2_controllers` is the own v2 cgroup's
  /// cgroup.controllers (empty when v2 has none).
  static outcome<cgroup_layout> parse(const std::string& mountinfo,
                                      const std::string& proc_self_cgroup,
                                      const std::string& v2_controllers);

  const cgroup_controller* find(const std::string& name) const noexcept;
  const std::vector<cgroup_controller>& controllers() const noexcept { return controllers_; }
  /// The v2 mount point, empty when none is mounted.
  const std::string& v2_mount() const noexcept { return v2_mount_; }
  /// This process's own v2 cgroup directory, empty when none.
  const std::string& v2_own_dir() const noexcept { return v2_own_dir_; }

  /// The same layout with every own directory (v2's too) moved down to
  /// `<own>/<relative>`: what worker cgroups are created below when a
  /// supervisor keeps them in its own subtree (cgroup_subtree.hpp).
  /// `relative` is a relative path without "." or ".." components.
  cgroup_layout below(const std::string& relative) const;

private:
  std::vector<cgroup_controller> controllers_;
  std::string v2_mount_;
  std::string v2_own_dir_;
};

/// Limits of one worker (0 = not limited). The defaults are castellan's
/// defaults for a Python worker.
struct cgroup_limits {
  uint64_t memory_bytes = 256ull << 20; ///< RAM; swap is turned off where the kernel allows
  uint32_t pids = 32;                   ///< tasks (processes and threads)
  uint32_t cpu_percent = 100;           ///< of one core (quota per 100 ms period)
};

/// The limits as read back from the cgroup files.
struct cgroup_applied_limits {
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> memory_swap_bytes; ///< v1 memsw (RAM+swap) or v2 swap.max
  std::optional<uint64_t> pids;
  std::optional<uint64_t> cpu_quota_us;
  std::optional<uint64_t> cpu_period_us;
};

/// Accounting of one worker cgroup (absent = this kernel/hierarchy lacks it).
struct cgroup_usage {
  std::optional<uint64_t> cpu_usec;
  std::optional<uint64_t> memory_current_bytes;
  std::optional<uint64_t> memory_peak_bytes;
  std::optional<uint64_t> oom_kills;
  std::optional<uint64_t> pids_current;
};

/// One worker's cgroup(s); removes them on destruction (after killing any
/// task left).
class worker_cgroup {
public:
  /// Creates `name` below the own cgroup of every hierarchy needed (memory,
  /// pids, cpu for the limits that are set; cpuacct and freezer on v1 when
  /// present, for usage and for killing) and writes the limits. A limit whose
  /// controller is missing is an error, not a silent omission.
  static outcome<worker_cgroup> create(const cgroup_layout& layout, const std::string& name,
                                       const cgroup_limits& limits);

  /// A name unique in this process: "<prefix>-<pid>-<counter>".
  static std::string unique_name(const std::string& prefix = "castellan");

  worker_cgroup(worker_cgroup&& other) noexcept;
  worker_cgroup& operator=(worker_cgroup&& other) noexcept;
  worker_cgroup(const worker_cgroup&) = delete;
  worker_cgroup& operator=(const worker_cgroup&) = delete;
  ~worker_cgroup();

  /// Every directory created (v1: one per hierarchy), for
  /// worker_spec::cgroup.directories.
  std::vector<std::string> directories() const;
  /// The v2 directory, for CLONE_INTO_CGROUP (empty when all is v1).
  std::string v2_directory() const;
  /// Where spawn_worker puts a worker: the v2 directory through
  /// CLONE_INTO_CGROUP (no moment outside the limits), the v1 ones by a
  /// write to cgroup.procs before the child is released.
  cgroup_placement placement() const;
  /// The directory serving `controller` ("memory", "cpuacct", …) and its
  /// version; empty when the cgroup has none for it.
  std::string directory_of(const std::string& controller,
                           cgroup_version* version = nullptr) const;
  /// Which hierarchy each controller is on: "memory=v1,pids=v1,…".
  std::string describe() const;

  /// Moves `pid` (a whole process) into the cgroup in every hierarchy.
  outcome<void> attach(pid_t pid);
  /// The pids in the cgroup (in this process's pid namespace).
  outcome<std::vector<pid_t>> pids() const;

  outcome<cgroup_applied_limits> applied_limits() const;
  outcome<cgroup_usage> usage() const;
  /// Starts a new peak-memory window: v1 writes 0 to memory.max_usage_in_bytes
  /// (the peak restarts from the current usage); v2 writes to memory.peak
  /// (kernels from 6.12; older ones refuse, and the peak stays the
  /// cgroup's lifetime peak). false when the peak could not be reset.
  bool reset_peak_memory() noexcept;

  /// How one pass of signal_all() reached the tasks.
  struct signal_pass {
    const char* method = "none"; ///< "cgroup.kill", "freezer" or "kill-loop"
    std::size_t tasks = 0;       ///< pids signalled (v1; cgroup.kill does not say)
  };

  /// One pass that sends SIGKILL to every task without waiting for any of
  /// them to die, so that it can run on a thread that must not block: v2
  /// writes cgroup.kill (atomic, forks included); v1 freezes the cgroup
  /// (when the freezer is there and `freeze` is true: frozen tasks cannot
  /// fork past the pid list), SIGKILLs every pid in cgroup.procs and thaws.
  /// Without the freezer a fork can race the pid list: call again (or
  /// kill_all) until empty, or let something else stop the forks (a pid
  /// namespace whose init is dying allocates no more pids). Freezing is not
  /// free: a v1 freeze and thaw each switch a kernel static key, 4-8 ms on a
  /// paravirtualised guest.
  outcome<signal_pass> signal_all(bool freeze = true) noexcept;

  /// Kills every task (signal_all() until cgroup.procs is empty, freezing
  /// only from the fourth pass on) and waits until the cgroup is empty, at
  /// most `timeout`. An empty cgroup costs one read of cgroup.procs.
  outcome<void> kill_all(std::chrono::milliseconds timeout = std::chrono::seconds(5));

  /// Removes the directories (and any child cgroups), retrying while tasks
  /// drain, until `timeout`.
  outcome<void> remove(std::chrono::milliseconds timeout = std::chrono::seconds(5));

private:
  struct node {
    std::string controller; ///< the controllers it serves, comma-joined
    cgroup_version version;
    std::string dir;
  };
  worker_cgroup() = default;
  const node* node_for(const std::string& controller) const noexcept;

  std::vector<node> nodes_;
  std::vector<std::pair<std::string, std::size_t>> by_controller_; ///< controller → nodes_ index
  bool removed_ = true;
};

} // namespace castellan::platform
