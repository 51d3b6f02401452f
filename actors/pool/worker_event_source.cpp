#include "actors/pool/worker_event_source.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/pool/pool_actor.hpp"

namespace castellan {

namespace {

// user_data = (id << 2) | tag, where id is the worker id, or for a deadline
// the dispatch serial. Ids start at 1, so the wake fd (id 0) is distinct.
// Bit 63 marks the completion of a removal (poll or timeout), which only
// makes the loop look at its command queue.
enum tag : uint64_t { wake_tag = 0, doorbell_tag = 1, pidfd_tag = 2, deadline_tag = 3 };

constexpr uint64_t removal_mark = uint64_t{1} << 63;

constexpr uint64_t encode(uint64_t id, tag t) noexcept {
  return (id << 2) | t;
}

} // namespace

outcome<std::unique_ptr<worker_event_source>>
worker_event_source::start(caf::strong_actor_ptr pool) {
  // Two polls per worker plus the wake poll and removals: 256 slots cover a
  // large pool; the SQ is flushed when it fills anyway.
  auto ring = platform::uring::create(256);
  if (!ring)
    return ring.error().wrap("pool event source");
  auto wake = ipc::doorbell::create();
  if (!wake)
    return wake.error().wrap("pool event source");
  std::unique_ptr<worker_event_source> src(new worker_event_source(
    caf::actor_cast<caf::weak_actor_ptr>(pool), std::move(*ring), std::move(*wake)));
  src->arm_wake();
  io_uring_submit(src->ring_.get());
  src->thread_ = std::thread([s = src.get()] { s->run(); });
  return src;
}

worker_event_source::worker_event_source(caf::weak_actor_ptr pool, platform::uring ring,
                                         ipc::doorbell wake)
  : pool_(std::move(pool)), ring_(std::move(ring)), wake_(std::move(wake)) {}

worker_event_source::~worker_event_source() {
  if (thread_.joinable()) {
    post({command::kind::stop, 0, -1, -1});
    thread_.join();
  }
}

void worker_event_source::watch(uint64_t id, int doorbell_fd, int pidfd) {
  post({command::kind::watch, id, doorbell_fd, pidfd});
}

void worker_event_source::unwatch(uint64_t id) {
  post({command::kind::unwatch, id, -1, -1});
}

void worker_event_source::arm_deadline(uint64_t id, uint64_t serial,
                                       std::chrono::steady_clock::time_point when) {
  command cmd{command::kind::arm, id, -1, -1};
  cmd.serial = serial;
  cmd.when_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  post(cmd);
}

void worker_event_source::disarm_deadline(uint64_t serial) {
  command cmd{command::kind::disarm, 0, -1, -1};
  cmd.serial = serial;
  post(cmd, false);
}

void worker_event_source::post(command cmd, bool wake) {
  {
    std::lock_guard<std::mutex> guard(mtx_);
    pending_.push_back(cmd);
  }
  if (!wake)
    return;
  // The wake eventfd is ours alone; a failure here means the counter is
  // saturated, which only happens if millions of commands are unserved.
  if (auto ok = wake_.ring(); !ok)
    spdlog::error("pool event source: wake: {}", ok.error().describe());
}

template <class... Ts>
void worker_event_source::tell_pool(Ts&&... xs) {
  if (auto strong = caf::actor_cast<caf::strong_actor_ptr>(pool_))
    caf::anon_send(caf::actor_cast<pool_actor>(strong), std::forward<Ts>(xs)...);
}

void worker_event_source::arm_wake() {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_poll_multishot(sqe, wake_.fd(), POLLIN);
  io_uring_sqe_set_data64(sqe, encode(0, wake_tag));
}

void worker_event_source::arm_doorbell(uint64_t id, int fd) {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_poll_multishot(sqe, fd, POLLIN);
  io_uring_sqe_set_data64(sqe, encode(id, doorbell_tag));
}

void worker_event_source::arm_pidfd(uint64_t id, int fd) {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_poll_add(sqe, fd, POLLIN);
  io_uring_sqe_set_data64(sqe, encode(id, pidfd_tag));
}

void worker_event_source::arm_timer(uint64_t serial, deadline_timer& t) {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_timeout(sqe, &t.when, 0, IORING_TIMEOUT_ABS);
  io_uring_sqe_set_data64(sqe, encode(serial, deadline_tag));
}

void worker_event_source::apply(const command& cmd, bool& running) {
  switch (cmd.what) {
    case command::kind::watch:
      doorbells_.emplace_back(cmd.id, cmd.doorbell_fd);
      arm_doorbell(cmd.id, cmd.doorbell_fd);
      arm_pidfd(cmd.id, cmd.pidfd);
      break;
    case command::kind::unwatch: {
      doorbells_.erase(std::remove_if(doorbells_.begin(), doorbells_.end(),
                                      [&](const auto& d) { return d.first == cmd.id; }),
                       doorbells_.end());
      for (tag t : {doorbell_tag, pidfd_tag}) {
        io_uring_sqe* sqe = ring_.next_sqe();
        io_uring_prep_poll_remove(sqe, encode(cmd.id, t));
        // The removal's own completion is uninteresting: tag it as the wake fd
        // so the loop only re-checks its command queue.
        io_uring_sqe_set_data64(sqe, encode(0, wake_tag) | removal_mark);
      }
      break;
    }
    case command::kind::arm: {
      deadline_timer t{cmd.id, {}};
      t.when.tv_sec = cmd.when_ns / 1'000'000'000;
      t.when.tv_nsec = cmd.when_ns % 1'000'000'000;
      auto [it, fresh] = deadlines_.emplace(cmd.serial, t);
      if (fresh)
        arm_timer(cmd.serial, it->second);
      break;
    }
    case command::kind::disarm: {
      if (deadlines_.erase(cmd.serial) == 0)
        break; // fired already
      io_uring_sqe* sqe = ring_.next_sqe();
      io_uring_prep_timeout_remove(sqe, encode(cmd.serial, deadline_tag), 0);
      io_uring_sqe_set_data64(sqe, encode(0, wake_tag) | removal_mark);
      break;
    }
    case command::kind::stop:
      running = false;
      break;
  }
}

void worker_event_source::run() {
  bool running = true;
  std::vector<command> batch;
  while (running) {
    int rc = io_uring_submit_and_wait(ring_.get(), 1);
    if (rc < 0 && rc != -EINTR && rc != -EBUSY) {
      spdlog::critical("pool event source: io_uring_submit_and_wait: {}", std::strerror(-rc));
      return;
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head;
    unsigned seen = 0;
    io_uring_for_each_cqe(ring_.get(), head, cqe) {
      ++seen;
      const uint64_t data = io_uring_cqe_get_data64(cqe);
      if (data & removal_mark)
        continue;
      const uint64_t id = data >> 2;
      const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
      switch (static_cast<tag>(data & 3)) {
        case wake_tag:
          wake_.drain();
          if (!more)
            arm_wake();
          break;
        case doorbell_tag: {
          if (cqe->res == -ECANCELED || cqe->res == -ENOENT)
            break; // unwatched
          auto it = std::find_if(doorbells_.begin(), doorbells_.end(),
                                 [&](const auto& d) { return d.first == id; });
          if (it == doorbells_.end())
            break;
          // Clear the counter before telling the pool, which then drains the
          // ring: a frame published after this point rings again.
          ::eventfd_t ignored;
          (void)::read(it->second, &ignored, sizeof ignored);
          tell_pool(doorbell_atom::value, id);
          if (!more)
            arm_doorbell(id, it->second);
          break;
        }
        case pidfd_tag:
          if (cqe->res == -ECANCELED || cqe->res == -ENOENT)
            break;
          tell_pool(exited_atom::value, id);
          break;
        case deadline_tag: {
          // -ETIME: the time came. -ECANCELED: removed by a disarm.
          if (cqe->res != -ETIME)
            break;
          auto it = deadlines_.find(id);
          if (it == deadlines_.end())
            break; // disarmed while the completion was on its way
          const uint64_t worker = it->second.worker_id;
          deadlines_.erase(it);
          tell_pool(deadline_atom::value, worker, id);
          break;
        }
        default:
          break;
      }
    }
    io_uring_cq_advance(ring_.get(), seen);
    // Lazy disarms are posted without a wake: take the queue on every
    // wake-up, not only the wake fd's.
    {
      {
        std::lock_guard<std::mutex> guard(mtx_);
        batch.swap(pending_);
      }
      for (const auto& cmd : batch)
        apply(cmd, running);
      batch.clear();
    }
  }
}

} // namespace castellan
