#include "actors/pool/worker_event_source.hpp"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <future>
#include <optional>

#include <caf/actor_cast.hpp>
#include <caf/send.hpp>
#include <spdlog/spdlog.h>

#include "actors/mediation/mediation_privileges.hpp"
#include "actors/pool/pool_internal.hpp"

namespace castellan {

namespace {

// user_data = (id << 3) | tag, where id is the worker id, or for a deadline
// the dispatch serial. Ids start at 1, so the wake fd (id 0) is distinct.
// Bit 63 marks the completion of a removal (poll or timeout), which only
// makes the loop look at its command queue.
enum tag : uint64_t {
  wake_tag = 0, doorbell_tag = 1, pidfd_tag = 2, deadline_tag = 3, control_tag = 4, notify_tag = 5
};

constexpr uint64_t removal_mark = uint64_t{1} << 63;

constexpr uint64_t encode(uint64_t id, tag t) noexcept {
  return (id << 3) | t;
}

/// The listener may hold several notifications (several threads of the
/// worker); a receive with none pending would block, so look first.
bool readable_now(int fd) noexcept {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

} // namespace

outcome<std::unique_ptr<worker_event_source>>
worker_event_source::start(caf::strong_actor_ptr pool) {
  // Two polls per worker plus the wake poll and removals: 256 slots cover a
  // large pool; the SQ is flushed when it fills anyway.
  // A ring that defers its task work to this source's thread: io_uring
  // then never interrupts the thread's other blocking calls, which lets the
  // mediator answer an open with its fd in one step (answer_fds_in_one_step).
  auto ring = platform::uring::create_single_issuer(256);
  if (!ring)
    return ring.error().wrap("pool event source");
  auto wake = ipc::doorbell::create();
  if (!wake)
    return wake.error().wrap("pool event source");
  std::unique_ptr<worker_event_source> src(new worker_event_source(
    caf::actor_cast<caf::weak_actor_ptr>(pool), std::move(*ring), std::move(*wake)));
  src->arm_wake(); // submitted by the thread's first wait
  // The thread must become the ring's submitter before anything else; the
  // pool learns here, not from a silent thread, if it cannot.
  std::promise<std::optional<failure>> adopted;
  auto adoption = adopted.get_future();
  src->thread_ = std::thread([s = src.get(), &adopted] {
    // No signal is for this thread (workers are watched through pidfds):
    // blocked, none interrupts an answer to a worker's call.
    sigset_t all;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
    if (auto ok = s->ring_.adopt(); !ok) {
      adopted.set_value(ok.error());
      return;
    }
    adopted.set_value(std::nullopt); // `adopted` is not touched again
    // This thread opens, creates and removes files for workers
    // (syscall_mediator): it must not carry the supervisor's supplementary
    // groups into those checks. The raw call changes this thread only
    // (glibc's setgroups changes all).
    // (Done whether or not the pool's policy has it decide anything yet: a
    // reload may bring the first mediated worker.)
    if (::geteuid() == 0)
      (void)::syscall(SYS_setgroups, 0, nullptr);
    // Nor any effective capability: what it does for a worker is checked
    // as the worker's own call; its own steps raise what they need
    // (mediation_privileges.hpp). A thread that keeps them decides nothing
    // (each call answers EPERM).
    if (!mediation::drop_effective_for_good())
      spdlog::error("pool event source: cannot empty its effective capabilities");
    s->run();
  });
  if (auto why = adoption.get(); why) {
    src->thread_.join();
    return why->wrap("pool event source");
  }
  return src;
}

worker_event_source::worker_event_source(caf::weak_actor_ptr pool, platform::uring ring,
                                         ipc::doorbell wake)
  : pool_(std::move(pool)), ring_(std::move(ring)), wake_(std::move(wake)) {}

worker_event_source::~worker_event_source() {
  if (thread_.joinable()) {
    post({command::kind::stop, 0, -1, -1, -1});
    thread_.join();
  }
}

void worker_event_source::watch(uint64_t id, int doorbell_fd, int pidfd, int control_fd,
                                std::shared_ptr<syscall_mediator> mediator) {
  command cmd{command::kind::watch, id, doorbell_fd, pidfd, control_fd};
  cmd.mediator = std::move(mediator);
  post(std::move(cmd));
}

void worker_event_source::unwatch(uint64_t id) {
  post({command::kind::unwatch, id, -1, -1, -1});
}

void worker_event_source::arm_deadline(uint64_t id, uint64_t serial,
                                       std::chrono::steady_clock::time_point when) {
  command cmd{command::kind::arm, id, -1, -1, -1};
  cmd.serial = serial;
  cmd.when_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(when.time_since_epoch()).count();
  post(cmd);
}

void worker_event_source::disarm_deadline(uint64_t serial) {
  command cmd{command::kind::disarm, 0, -1, -1, -1};
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
    caf::anon_send(caf::actor_cast<pool_internal_actor>(strong), std::forward<Ts>(xs)...);
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

void worker_event_source::arm_control(uint64_t id, int fd) {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_poll_add(sqe, fd, POLLIN);
  io_uring_sqe_set_data64(sqe, encode(id, control_tag));
}

void worker_event_source::arm_notify(uint64_t id, int fd) {
  io_uring_sqe* sqe = ring_.next_sqe();
  io_uring_prep_poll_multishot(sqe, fd, POLLIN);
  io_uring_sqe_set_data64(sqe, encode(id, notify_tag));
}

void worker_event_source::on_control(uint64_t id, watched& w) {
  auto& m = w.mediated;
  if (m.listener)
    return;
  auto got = [&] {
    // pidfd_getfd of the worker's listener: a step of the supervisor's own.
    mediation::raised_capabilities step(mediation::ptrace_cap());
    return platform::take_listener(m.control_fd);
  }();
  if (!got && (got.error().code == EAGAIN || got.error().code == EINTR)) {
    arm_control(id, m.control_fd);
    return;
  }
  if (!got) {
    // The worker sent something else, or closed the socket: it gets no
    // listener served, so its decided calls fail (ENOSYS) once it is gone.
    spdlog::warn("pool event source: worker {}: {}", id, got.error().describe());
    return;
  }
  m.listener = std::make_unique<platform::notify_listener>(std::move(*got));
  (void)m.listener->set_sync_wakeup();
  arm_notify(id, m.listener->fd());
}

void worker_event_source::on_notify(uint64_t id, watched& w) {
  auto& m = w.mediated;
  if (!m.listener || !w.mediator)
    return;
  auto& mediator = *w.mediator;
  // Look before every receive, the first included: a completion may report
  // a notification an earlier loop has already handled, and a receive with
  // none pending would block this thread.
  while (!m.killed && readable_now(m.listener->fd())) {
    auto r = mediator.handle(m);
    if (!r)
      continue;
    const std::string& policy = mediator.policy().name();
    switch (r->what) {
      case mediation_result::outcome::deny:
        tell_pool(syscall_denied{id, policy, r->errno_value, std::move(r->event)});
        break;
      case mediation_result::outcome::warn:
        tell_pool(policy_warning{id, policy, std::move(r->event)});
        break;
      case mediation_result::outcome::kill:
        tell_pool(optimistic_violation{id, policy, std::move(r->event)});
        break;
      default:
        break;
    }
  }
}

void worker_event_source::apply(const command& cmd, bool& running) {
  switch (cmd.what) {
    case command::kind::watch: {
      auto& w = workers_[cmd.id];
      w.doorbell_fd = cmd.doorbell_fd;
      w.mediated.id = cmd.id;
      w.mediated.pidfd = cmd.pidfd;
      w.mediated.control_fd = cmd.control_fd;
      w.mediator = cmd.mediator;
      arm_doorbell(cmd.id, cmd.doorbell_fd);
      arm_pidfd(cmd.id, cmd.pidfd);
      if (cmd.control_fd >= 0 && w.mediator) {
        // Set on this thread, the only one that uses the mediator.
        w.mediator->answer_fds_in_one_step(ring_.defers_task_work());
        arm_control(cmd.id, cmd.control_fd);
      }
      break;
    }
    case command::kind::unwatch: {
      // Closes the worker's listener: a call still waiting fails.
      workers_.erase(cmd.id);
      for (tag t : {doorbell_tag, pidfd_tag, control_tag, notify_tag}) {
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
      const uint64_t id = data >> 3;
      const bool more = (cqe->flags & IORING_CQE_F_MORE) != 0;
      switch (static_cast<tag>(data & 7)) {
        case wake_tag:
          wake_.drain();
          if (!more)
            arm_wake();
          break;
        case doorbell_tag: {
          if (cqe->res == -ECANCELED || cqe->res == -ENOENT)
            break; // unwatched
          auto it = workers_.find(id);
          if (it == workers_.end())
            break;
          // Clear the counter before telling the pool, which then drains the
          // ring: a frame published after this point rings again.
          ::eventfd_t ignored;
          (void)::read(it->second.doorbell_fd, &ignored, sizeof ignored);
          tell_pool(doorbell_atom::value, id);
          if (!more)
            arm_doorbell(id, it->second.doorbell_fd);
          break;
        }
        case control_tag: {
          if (cqe->res == -ECANCELED || cqe->res == -ENOENT)
            break;
          if (auto it = workers_.find(id); it != workers_.end())
            on_control(id, it->second);
          break;
        }
        case notify_tag: {
          if (cqe->res == -ECANCELED || cqe->res == -ENOENT)
            break;
          auto it = workers_.find(id);
          if (it == workers_.end())
            break;
          on_notify(id, it->second);
          auto& m = it->second.mediated;
          // POLLHUP: every process of the filter is gone; no more to come.
          if (!more && m.listener && !m.killed && (cqe->res & POLLHUP) == 0)
            arm_notify(id, m.listener->fd());
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
