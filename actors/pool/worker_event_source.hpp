#pragma once

/// @file worker_event_source.hpp
/// The pool's event source: one thread that owns the pool's io_uring ring and
/// turns kernel events into messages to the pool — a worker's doorbell rang,
/// a worker's process exited. Blocking on the ring never blocks a CAF
/// scheduler thread.

#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <caf/weak_intrusive_ptr.hpp>
#include <caf/actor_control_block.hpp>

#include "ipc/doorbell.hpp"
#include "ipc/result.hpp"
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
  void watch(uint64_t id, int doorbell_fd, int pidfd);

  /// Stops watching worker `id`; thread-safe. Events already in flight may
  /// still arrive: the pool ignores ids it no longer knows (ids are never reused).
  void unwatch(uint64_t id);

private:
  struct command {
    enum class kind : uint8_t { watch, unwatch, stop } what;
    uint64_t id;
    int doorbell_fd;
    int pidfd;
  };

  worker_event_source(caf::weak_actor_ptr pool, platform::uring ring, ipc::doorbell wake);
  void post(command cmd);
  void run();
  void apply(const command& cmd, bool& running);
  void arm_doorbell(uint64_t id, int fd);
  void arm_pidfd(uint64_t id, int fd);
  void arm_wake();
  template <class... Ts>
  void tell_pool(Ts&&... xs);

  caf::weak_actor_ptr pool_;
  platform::uring ring_;
  ipc::doorbell wake_;
  std::mutex mtx_;
  std::vector<command> pending_; ///< guarded by mtx_
  std::thread thread_;
  /// Doorbell fds by worker, touched only by the thread (to drain them).
  std::vector<std::pair<uint64_t, int>> doorbells_;
};

} // namespace castellan
