#include "apps/castellan/interrupt_canceller.hpp"

#include <poll.h>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <iostream>

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

interrupt_canceller::interrupt_canceller(std::function<void()> cancel)
  : cancel_(std::move(cancel)) {
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
  thread_ = std::thread([this] { run(); });
}

interrupt_canceller::~interrupt_canceller() {
  if (!thread_.joinable())
    return;
  (void)stop_->ring();
  thread_.join();
}

void interrupt_canceller::run() {
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
    cancel_();
  }
}

} // namespace castellan::cli
