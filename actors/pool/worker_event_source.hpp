#pragma once

/// @file worker_event_source.hpp
/// The pool's event source: one thread that owns the pool's io_uring ring and
/// turns kernel events into messages to the pool — a worker's doorbell rang,
/// a worker's process exited, an exec's deadline passed. Blocking on the ring
/// never blocks a CAF scheduler thread.

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include <caf/weak_intrusive_ptr.hpp>
#include <caf/actor_control_block.hpp>

#include "actors/mediation/syscall_mediator.hpp"
#include "ipc/doorbell.hpp"
#include "ipc/outcome.hpp"
#include "platform/linux/uring.hpp"

namespace castellan {

class worker_event_source {
public:
  /// Starts the thread. Events go to `pool` (held weakly: the source never
  /// keeps the pool alive).
  static outcome<std::unique_ptr<worker_event_source>> start(caf::strong_actor_ptr pool);

  worker_event_source(const worker_event_source&) = delete;
  worker_event_source& operator=(const worker_event_source&) = delete;
  /// Stops and joins the thread.
  ~worker_event_source();

  /// Starts watching worker `id`: its doorbell eventfd (multishot poll; the
  /// thread clears the counter before it tells the pool) and its pidfd (one
  /// poll: readable once the process has exited). The fds must stay open
  /// until `unwatch(id)`; thread-safe.
  /// `control_fd` (-1: none) is the worker's control socket: the thread
  /// takes the worker's seccomp listener there, then decides every
  /// notification on it with `mediator` (syscall_mediator.hpp) and tells
  /// the pool about denials, warnings and optimistic kills. Workers started
  /// under different revisions of a policy have different mediators. From
  /// this call on only the thread uses `mediator`: its caller keeps at most
  /// a reference it never calls through.
  void watch(uint64_t id, int doorbell_fd, int pidfd, int control_fd = -1,
             std::shared_ptr<syscall_mediator> mediator = nullptr);

  /// Stops watching worker `id`; thread-safe. Events already in flight may
  /// still arrive: the pool ignores ids it no longer knows (ids are never reused).
  void unwatch(uint64_t id);

  /// Arms the deadline of dispatch `serial` on worker `id`: an io_uring
  /// timeout at the absolute time `when` (CLOCK_MONOTONIC, which is
  /// steady_clock), after which the pool receives
  /// `deadline_atom, id, serial`. Thread-safe.
  void arm_deadline(uint64_t id, uint64_t serial, std::chrono::steady_clock::time_point when);

  /// Drops the deadline of dispatch `serial` (its exec ended). Lazy: the
  /// thread is not woken for it and removes the timer at its next wake-up;
  /// a deadline that fires before then still reaches the pool, which
  /// ignores serials that are no longer running. Thread-safe.
  void disarm_deadline(uint64_t serial);

private:
  struct command {
    enum class kind : uint8_t { watch, unwatch, stop, arm, disarm } what;
    uint64_t id;
    int doorbell_fd;
    int pidfd;
    int control_fd;
    uint64_t serial = 0;
    int64_t when_ns = 0; ///< arm: CLOCK_MONOTONIC
    std::shared_ptr<syscall_mediator> mediator = nullptr; ///< watch: decides its notifications
  };

  /// What the thread keeps per worker.
  struct watched {
    int doorbell_fd = -1;
    mediated_worker mediated; ///< pidfd, control fd, listener once received
    std::shared_ptr<syscall_mediator> mediator; ///< null: none of its calls is decided here
  };

  /// An armed deadline. The timespec is read by the kernel when the SQE is
  /// submitted, so it lives here (map nodes do not move) until then.
  struct deadline_timer {
    uint64_t worker_id;
    __kernel_timespec when;
  };

  worker_event_source(caf::weak_actor_ptr pool, platform::uring ring, ipc::doorbell wake);
  void post(command cmd, bool wake = true);
  void run();
  void apply(const command& cmd, bool& running);
  void arm_doorbell(uint64_t id, int fd);
  void arm_pidfd(uint64_t id, int fd);
  void arm_wake();
  void arm_timer(uint64_t serial, deadline_timer& t);
  void arm_control(uint64_t id, int fd);
  void arm_notify(uint64_t id, int fd);
  void on_control(uint64_t id, watched& w);
  void on_notify(uint64_t id, watched& w);
  template <class... Ts>
  void tell_pool(Ts&&... xs);

  caf::weak_actor_ptr pool_;
  platform::uring ring_;
  ipc::doorbell wake_;
  std::mutex mtx_;
  std::vector<command> pending_; ///< guarded by mtx_
  std::thread thread_;
  /// The workers, touched only by the thread.
  std::map<uint64_t, watched> workers_;
  /// Armed deadlines by dispatch serial, touched only by the thread.
  std::map<uint64_t, deadline_timer> deadlines_;
};

} // namespace castellan
