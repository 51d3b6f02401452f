#pragma once

/// @file pool_worker.hpp
/// A worker as its pool holds it: the process (pidfd, status pipe), the
/// shared segment with both rings and the two doorbells, its cgroup and its
/// egress link; `start` assembles all of it (sandbox spec, launcher or
/// spawn). Also the worker template every worker of a pool starts from. The
/// pool actor is the only user: it produces into to_worker and consumes
/// to_supervisor.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "actors/exec_messages.hpp"

#include "ipc/doorbell.hpp"
#include "ipc/ring.hpp"
#include "ipc/segment.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/cgroups.hpp"
#include "platform/linux/sandbox_spec.hpp"
#include "platform/linux/worker_launcher.hpp"
#include "platform/linux/worker_kill.hpp"

namespace castellan {

struct pool_config;

/// What every worker of a pool starts from, prepared once when the pool
/// starts rather than for each worker: the sandbox spec, with its seccomp
/// filter compiled (sandboxed pools only).
struct worker_template {
  std::optional<platform::sandbox_spec> sandbox;
  /// The pool's launcher when it starts workers warm (pool_config::warm_start).
  std::shared_ptr<platform::worker_launcher> launcher;
};

/// Prepares the template of `cfg`'s workers; fails where every worker would
/// (a profile that makes no valid spec, a system call libseccomp does not
/// know, a launcher that does not start).
outcome<worker_template> prepare_worker_template(const pool_config& cfg);

class pool_worker {
public:
  /// Creates the segment and doorbells and starts castellan-worker with them.
  static outcome<std::unique_ptr<pool_worker>> start(uint64_t id, const pool_config& cfg,
                                                        const worker_template& tpl);

  pool_worker(const pool_worker&) = delete;
  pool_worker& operator=(const pool_worker&) = delete;
  /// Kills and reaps the process if that has not happened yet: no worker
  /// outlives its channel.
  ~pool_worker();

  uint64_t id() const noexcept { return id_; }
  pid_t pid() const noexcept { return pid_; }
  int pidfd() const noexcept { return pidfd_.get(); }
  int doorbell_fd() const noexcept { return to_supervisor_.fd(); }
  /// The control socket (-1 when the sandbox has no notify filter): the
  /// worker's seccomp listener arrives there.
  int control_fd() const noexcept { return control_.get(); }

  /// Writes one frame to the worker and rings its doorbell. A full ring is a
  /// failure here: the pool only sends when the worker is idle, and a request
  /// never exceeds the ring (the code limit is below its capacity).
  outcome<void> send(ipc::message_type type, uint32_t request_id, std::string_view payload);

  /// Rings the worker's doorbell without sending: after the pool drained the
  /// worker's ring, a harness waiting for space there resumes at once.
  outcome<void> wake() { return to_worker_.ring(); }

  /// The next frame from the worker (see ipc::ring_reader::read). A READY
  /// frame's enforcement report is kept (see enforcement()).
  ipc::read_result receive();

  /// What was requested of this worker's sandbox and what is in force, as
  /// one JSON object (platform/linux/enforcement_report.hpp, with the
  /// worker's own Landlock/seccomp/capabilities/root parts from its READY);
  /// "" for an unsandboxed worker.
  const std::string& enforcement() const noexcept { return enforcement_; }

  /// CPU time and peak memory of the worker's cgroup since the last CODE or
  /// COMMAND was sent (zeros without a cgroup).
  resource_usage exec_usage() const noexcept;

  /// True when the cgroup's OOM killer struck since the last CODE or
  /// COMMAND was sent.
  bool oom_killed() const noexcept;

  /// Tasks (processes and threads) in the worker's cgroup now; nullopt
  /// without a pids controller. The pool compares it with the idle count
  /// after each exec: more means the exec left something running.
  std::optional<uint64_t> tasks() const noexcept;

  /// The cgroup's accounting now (platform::worker_cgroup::usage); nullopt
  /// without a cgroup or when it cannot be read.
  std::optional<platform::cgroup_usage> cgroup_usage() const;

  /// SIGKILL to every process of the worker (platform/linux/worker_kill.hpp:
  /// its cgroup, its pid namespace's init, its process group). Does not wait:
  /// the pidfd reports the exit.
  platform::worker_kill_report kill() noexcept;

  /// Reaps the process once it has exited; a description of how it ended,
  /// with the layer or start-up step PID 1 reported on its status pipe
  /// (nothing else names a layer: not the exit status, which the code
  /// controls once the harness runs).
  std::string reap() noexcept;

  /// egress: the proxy's end of this worker's egress socket pair (taken
  /// once; invalid when the worker has no network).
  unique_fd take_egress_link() noexcept { return std::move(egress_link_); }
  /// egress: the exec the worker runs, shared with the proxy (null when the
  /// worker has no network).
  const std::shared_ptr<std::atomic<uint64_t>>& exec_marker() const noexcept {
    return exec_marker_;
  }
  /// egress: records that `exec_id` now runs (0: none), before its code is sent.
  void set_exec(uint64_t exec_id) noexcept {
    if (exec_marker_)
      exec_marker_->store(exec_id, std::memory_order_release);
  }

  /// Bytes waiting in each direction (the ring fill gauge).
  uint32_t to_worker_used() const noexcept { return writer_.used_bytes(); }
  uint32_t to_supervisor_used() const noexcept { return reader_.used_bytes(); }

private:
  pool_worker(uint64_t id, ipc::segment seg, ipc::doorbell to_worker,
                 ipc::doorbell to_supervisor);

  uint64_t id_;
  ipc::segment segment_;
  ipc::doorbell to_worker_;
  ipc::doorbell to_supervisor_;
  ipc::ring_writer writer_;
  ipc::ring_reader reader_;
  void begin_exec() noexcept;
  void note_ready(std::string_view payload);

  pid_t pid_ = -1;
  unique_fd pidfd_;
  unique_fd control_;
  unique_fd status_; ///< read end of the status pipe (worker/options.hpp, status_fd)
  bool reaped_ = false;
  bool pid_namespace_ = false; ///< the process is the init of its own pid namespace
  // Sandboxed workers only. Destroyed after the destructor body has killed
  // and reaped the process, so the cgroup is empty when it is removed.
  std::optional<platform::worker_cgroup> cgroup_;
  unique_fd cpu_usage_fd_;   ///< cpuacct.usage (ns) or cpu.stat
  unique_fd memory_peak_fd_; ///< memory.max_usage_in_bytes or memory.peak
  unique_fd oom_fd_;         ///< memory.oom_control or memory.events
  unique_fd pids_fd_;        ///< pids.current
  bool cgroup_v2_ = false;
  uint64_t cpu_base_us_ = 0;
  uint64_t oom_base_ = 0;
  std::string enforcement_;  ///< the supervisor's part until READY, then the whole
  unique_fd egress_link_;    ///< the proxy's end until the pool hands it over
  std::shared_ptr<std::atomic<uint64_t>> exec_marker_;
};

} // namespace castellan
