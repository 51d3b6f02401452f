#pragma once

/// @file worker_event_source.hpp
/// The pool's event source: one thread that owns the pool's io_uring ring and
/// turns kernel events into messages to the pool — a worker's doorbell rang,
/// a worker's process exited. Blocking on the ring never blocks a CAF
/// scheduler thread.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/weak_intrusive_ptr.hpp>
#include <caf/actor_control_block.hpp>

#include "actors/pool/syscall_mediator.hpp"
#include "ipc/doorbell.hpp"
#include "ipc/result.hpp"
#include "platform/linux/uring.hpp"

namespace castellan {

class worker_event_source {
public:
  /// Starts the thread. Events go to `pool` (held weakly: the source never
  /// keeps the pool alive).
  /// `policy` decides the seccomp notifications of the workers that send a
  /// listener (null: no worker does).
  static outcome<std::unique_ptr<worker_event_source>>
  start(caf::strong_actor_ptr pool,
        std::shared_ptr<const policy::compiled_policy> policy = nullptr);

  worker_event_source(const worker_event_source&) = delete;
  worker_event_source& operator=(const worker_event_source&) = delete;
  /// Stops and joins the thread.
  ~worker_event_source();

  /// Starts watching worker `id`: its doorbell eventfd (multishot poll; the
  /// thread clears the counter before it tells the pool) and its pidfd (one
  /// poll: readable once the process has exited). The fds must stay open
  /// until `unwatch(id)`; thread-safe. `control_fd` (-1: none) is the
  /// worker's control socket: the thread receives the worker's seccomp
  /// listener there, then decides every notification on it (see
  /// syscall_mediator.hpp) and tells the pool about denials, warnings and
  /// optimistic kills.
  void watch(uint64_t id, int doorbell_fd, int pidfd, int control_fd = -1);

  /// Stops watching worker `id`; thread-safe. Events already in flight may
  /// still arrive: the pool ignores ids it no longer knows (ids are never reused).
  void unwatch(uint64_t id);

private:
  struct command {
    enum class kind : uint8_t { watch, unwatch, stop } what;
    uint64_t id;
    int doorbell_fd;
    int pidfd;
    int control_fd;
  };

  /// What the thread keeps per worker.
  struct watched {
    int doorbell_fd = -1;
    mediated_worker mediated; ///< pidfd, control fd, listener once received
  };

  worker_event_source(caf::weak_actor_ptr pool, platform::uring ring, ipc::doorbell wake,
                      std::shared_ptr<const policy::compiled_policy> policy);
  void post(command cmd);
  void run();
  void apply(const command& cmd, bool& running);
  void arm_doorbell(uint64_t id, int fd);
  void arm_pidfd(uint64_t id, int fd);
  void arm_wake();
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
  std::optional<syscall_mediator> mediator_; ///< only with a policy; only the thread uses it
};

} // namespace castellan
