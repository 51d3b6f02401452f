#include "apps/castellan/interrupt_canceller.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <iostream>

#include <caf/all.hpp>

namespace castellan::cli {

sigint_block::sigint_block() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &block, &saved_);
}

sigint_block::~sigint_block() {
  // A SIGINT still pending (it came after the last cancel was read) is
  // dropped: the exec it meant is over, and the CLI is exiting anyway.
  sigset_t pending;
  sigemptyset(&pending);
  if (::sigpending(&pending) == 0 && sigismember(&pending, SIGINT) == 1) {
    struct sigaction ignore {};
    struct sigaction old {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGINT, &ignore, &old);
    ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
    ::sigaction(SIGINT, &old, nullptr);
    return;
  }
  ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
}

interrupt_canceller::interrupt_canceller(caf::actor_system& sys, supervisor_actor sup,
                                         uint64_t exec_id) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  signals_ = unique_fd{::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK)};
  auto stop = ipc::doorbell::create();
  if (!signals_ || !stop) {
    std::cerr << "castellan: Ctrl-C will not cancel this exec (signalfd/eventfd failed)\n";
    return;
  }
  stop_.emplace(std::move(*stop));
  thread_ = std::thread([this, &sys, sup = std::move(sup), exec_id] { run(sys, sup, exec_id); });
}

interrupt_canceller::~interrupt_canceller() {
  if (!thread_.joinable())
    return;
  (void)stop_->ring();
  thread_.join();
}

void interrupt_canceller::run(caf::actor_system& sys, supervisor_actor sup, uint64_t exec_id) {
  caf::scoped_actor self{sys};
  for (;;) {
    pollfd fds[2] = {{signals_.get(), POLLIN, 0}, {stop_->fd(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    signalfd_siginfo info;
    while (::read(signals_.get(), &info, sizeof info) == static_cast<ssize_t>(sizeof info)) {
    }
    std::cerr << "castellan: interrupted: cancelling exec " << exec_id << "\n";
    self->request(sup, std::chrono::seconds(10), cancel_atom::value, exec_id)
      .receive(
        [&](cancel_reply& r) {
          if (r.outcome != cancel_outcome::cancelled_running &&
              r.outcome != cancel_outcome::cancelled_queued)
            std::cerr << "castellan: " << r.detail << "\n";
        },
        [&](caf::error& err) { std::cerr << "castellan: cancel: " << describe(err, sys) << "\n"; });
  }
}

} // namespace castellan::cli
