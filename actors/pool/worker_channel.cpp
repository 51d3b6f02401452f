#include "actors/pool/worker_channel.hpp"

#include <fcntl.h>
#include <signal.h>

#include "actors/pool/pool_actor.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"

namespace castellan {

namespace {

// The fd numbers castellan-worker finds its channel on.
constexpr int segment_child_fd = 3;
constexpr int to_worker_child_fd = 4;
constexpr int to_supervisor_child_fd = 5;

} // namespace

worker_channel::worker_channel(uint64_t id, ipc::segment seg, ipc::doorbell to_worker,
                               ipc::doorbell to_supervisor)
  : id_(id),
    segment_(std::move(seg)),
    to_worker_(std::move(to_worker)),
    to_supervisor_(std::move(to_supervisor)),
    writer_(segment_, ipc::direction::to_worker),
    reader_(segment_, ipc::direction::to_supervisor) {}

outcome<std::unique_ptr<worker_channel>> worker_channel::start(uint64_t id,
                                                               const pool_config& cfg) {
  const std::string what = "worker " + std::to_string(id);
  auto seg = ipc::segment::create(cfg.ring_capacity);
  if (!seg)
    return seg.error().wrap(what);
  auto to_worker = ipc::doorbell::create();
  if (!to_worker)
    return to_worker.error().wrap(what);
  auto to_supervisor = ipc::doorbell::create();
  if (!to_supervisor)
    return to_supervisor.error().wrap(what);
  std::unique_ptr<worker_channel> ch(new worker_channel(
    id, std::move(*seg), std::move(*to_worker), std::move(*to_supervisor)));

  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull)
    return errno_failure(what + ": open /dev/null");

  platform::worker_spec spec;
  spec.executable = cfg.worker_binary;
  spec.argv = {cfg.worker_binary,
               "--segment-fd", std::to_string(segment_child_fd),
               "--to-worker-fd", std::to_string(to_worker_child_fd),
               "--to-supervisor-fd", std::to_string(to_supervisor_child_fd),
               "--python", cfg.python,
               "--harness", cfg.harness};
  spec.env = {"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8", "HOME=/tmp"};
  spec.fds = {{devnull.get(), 0},
              {devnull.get(), 1},
              {cfg.worker_stderr ? 2 : devnull.get(), 2},
              {ch->segment_.fd(), segment_child_fd},
              {ch->to_worker_.fd(), to_worker_child_fd},
              {ch->to_supervisor_.fd(), to_supervisor_child_fd}};
  auto child = platform::spawn_worker(spec);
  if (!child)
    return child.error().wrap(what);
  ch->pid_ = child->pid;
  ch->pidfd_ = std::move(child->pidfd);
  return ch;
}

outcome<void> worker_channel::send(ipc::message_type type, uint32_t request_id,
                                   std::string_view payload) {
  switch (writer_.write(type, request_id, payload)) {
    case ipc::ring_status::ok:
      break;
    case ipc::ring_status::full:
      return logic_failure("to_worker ring full (" + std::to_string(writer_.used_bytes()) +
                           " bytes unread by the worker)");
    default:
      return logic_failure("to_worker ring corrupt (the worker wrote an impossible head)");
  }
  return to_worker_.ring();
}

worker_channel::~worker_channel() {
  if (reaped_ || !pidfd_)
    return;
  kill();
  (void)platform::pidfd_reap(pidfd_.get());
}

void worker_channel::kill() noexcept {
  if (reaped_ || pid_ <= 0)
    return;
  (void)platform::pidfd_signal(pidfd_.get(), SIGKILL);
  // castellan-worker leads its own process group: this reaches the harness
  // and whatever it started, unless they left the group (the pid namespace of
  // the isolated backend closes that gap).
  ::kill(-pid_, SIGKILL);
}

std::string worker_channel::reap() noexcept {
  if (reaped_)
    return "already reaped";
  auto st = platform::pidfd_try_reap(pidfd_.get());
  if (!st)
    return st.error().describe();
  if (!*st)
    return "still running";
  reaped_ = true;
  return (*st)->describe();
}

} // namespace castellan
