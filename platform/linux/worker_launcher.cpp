/// @file worker_launcher.cpp
/// Starting, asking and stopping castellan-launcher (worker_launcher.hpp).

#include "platform/linux/worker_launcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "platform/linux/fd_passing.hpp"
#include "platform/linux/launch_request.hpp"
#include "platform/linux/pidfd.hpp"

namespace castellan::platform {

namespace {

/// The launcher's end of its socket.
constexpr int launcher_socket_fd = 3;

} // namespace

outcome<std::unique_ptr<worker_launcher>> worker_launcher::start(options opts) {
  std::unique_ptr<worker_launcher> l(new worker_launcher(std::move(opts)));
  if (auto ok = l->launch(); !ok)
    return ok.error();
  return l;
}

worker_launcher::~worker_launcher() { stop(); }

void worker_launcher::stop() noexcept {
  if (!pidfd_)
    return;
  // EOF on its socket ends the launcher; one that does not go in time is
  // killed. Either way it is reaped here (it is our child).
  socket_.reset();
  pollfd p{pidfd_.get(), POLLIN, 0};
  if (::poll(&p, 1, 1000) <= 0)
    (void)pidfd_signal(pidfd_.get(), SIGKILL);
  (void)pidfd_reap(pidfd_.get());
  pidfd_.reset();
  pid_ = -1;
}

outcome<void> worker_launcher::launch() {
  stop();
  ++starts_;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    return errno_failure("launcher: socketpair");
  unique_fd ours(pair[0]), theirs(pair[1]);
  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  if (!devnull)
    return errno_failure("launcher: open /dev/null");
  worker_spec spec;
  spec.executable = opts_.binary;
  spec.argv = {opts_.binary, "--python", opts_.python, "--harness", opts_.harness,
               "--socket-fd", std::to_string(launcher_socket_fd)};
  spec.env = opts_.env;
  spec.fds = {{devnull.get(), 0},
              {devnull.get(), 1},
              {opts_.stderr_fd >= 0 ? opts_.stderr_fd : devnull.get(), 2},
              {theirs.get(), launcher_socket_fd}};
  spec.isolation = isolation_mode::none;
  spec.die_with_parent = true;
  auto child = spawn_worker(spec);
  if (!child)
    return child.error().wrap("launcher");
  socket_ = std::move(ours);
  pidfd_ = std::move(child->pidfd);
  pid_ = child->pid;
  theirs.reset();

  // Its announcement, once the interpreter and the harness are loaded.
  if (auto ok = wait_readable(); !ok) {
    stop();
    return ok.error().wrap("launcher " + opts_.binary + ": no announcement");
  }
  auto msg = receive_message(socket_.get(), max_launch_message, 0);
  if (!msg || msg->closed) {
    std::string why = !msg ? msg.error().describe() : "it exited before announcing itself";
    stop();
    return logic_failure("launcher " + opts_.binary + ": " + why);
  }
  auto hello = decode_launch_reply(msg->payload);
  if (!hello || hello->what != launch_reply::kind::ready) {
    std::string why = !hello ? hello.error().describe()
                      : hello->what == launch_reply::kind::failed ? hello->error
                                                                  : "no announcement";
    stop();
    return logic_failure("launcher " + opts_.binary + ": " + why);
  }
  return {};
}

outcome<void> worker_launcher::wait_readable() {
  pollfd p{socket_.get(), POLLIN, 0};
  int rc;
  do {
    rc = ::poll(&p, 1, static_cast<int>(opts_.timeout.count()));
  } while (rc < 0 && errno == EINTR);
  if (rc < 0)
    return errno_failure("poll");
  if (rc == 0)
    return logic_failure("no answer within " + std::to_string(opts_.timeout.count()) + " ms");
  return {};
}

outcome<spawned_worker> worker_launcher::spawn(const worker_spec& spec) {
  auto text = encode_launch_request(spec);
  if (!text)
    return text.error();
  bool dead = false;
  if (pidfd_) {
    auto r = request(*text, spec, dead);
    if (r || !dead)
      return r;
  }
  // Gone (or never restarted after an earlier death): once more, afresh.
  if (auto ok = launch(); !ok)
    return ok.error();
  return request(*text, spec, dead);
}

namespace {

/// A worker the launcher cloned (our child, since CLONE_PARENT) that will
/// not be ours to run: killed and reaped. Its pid cannot have been reused:
/// an unreaped child keeps it.
void discard_child(pid_t pid) noexcept {
  if (pid <= 0)
    return;
  ::kill(pid, SIGKILL);
  siginfo_t info;
  while (::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED) != 0 && errno == EINTR) {
  }
}

} // namespace

outcome<spawned_worker> worker_launcher::request(const std::string& text,
                                                 const worker_spec& spec, bool& dead) {
  std::vector<int> fds;
  for (const auto& m : spec.fds)
    fds.push_back(m.parent_fd);
  if (auto sent = send_message(socket_.get(), text, fds.data(), fds.size()); !sent) {
    dead = sent.error().code == EPIPE || sent.error().code == ECONNRESET;
    if (dead)
      stop();
    return sent.error().wrap("launcher: sending the request");
  }
  pid_t cloned = -1;
  // Whatever goes wrong from here, a worker already cloned does not survive.
  auto give_up = [&](failure f, bool launcher_gone) -> outcome<spawned_worker> {
    discard_child(cloned);
    dead = launcher_gone;
    stop(); // a launcher that failed us is not trusted with the next worker
    return f;
  };
  for (;;) {
    if (auto ok = wait_readable(); !ok)
      return give_up(ok.error().wrap("launcher"), false);
    auto msg = receive_message(socket_.get(), max_launch_message, 1);
    if (!msg)
      return give_up(msg.error().wrap("launcher: reading the reply"),
                     msg.error().code == ECONNRESET);
    if (msg->closed)
      return give_up(logic_failure("launcher: it exited without answering"), true);
    auto reply = decode_launch_reply(msg->payload);
    if (!reply)
      return give_up(reply.error(), false);
    switch (reply->what) {
      case launch_reply::kind::cloned:
        if (cloned > 0 || !msg->fds.empty())
          return give_up(logic_failure("launcher: a second clone, or fds with it"), false);
        cloned = reply->pid;
        continue;
      case launch_reply::kind::failed:
        // The launcher killed what it cloned; reaping it is ours.
        discard_child(cloned);
        return failure{reply->error_code, reply->error};
      case launch_reply::kind::started:
        if (reply->pid != cloned || msg->fds.size() != 1)
          return give_up(logic_failure("launcher: started pid " + std::to_string(reply->pid) +
                                       " without its pidfd or its clone notice"),
                         false);
        {
          spawned_worker out;
          out.pid = reply->pid;
          out.pidfd = std::move(msg->fds.front());
          return out;
        }
      case launch_reply::kind::ready:
        break;
    }
    return give_up(logic_failure("launcher: an announcement in place of a reply"), false);
  }
}

} // namespace castellan::platform
