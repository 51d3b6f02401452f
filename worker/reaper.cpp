/// @file reaper.cpp
/// Signal forwarding and reaping through a signalfd: no handlers, so no
/// async-signal-safety concerns and no lost SIGCHLD; the same poll() also
/// serves the egress relay's listener.

#include "worker/reaper.hpp"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "ipc/unique_fd.hpp"
#include "worker/egress_relay.hpp"

namespace castellan::worker {

namespace {

constexpr int forwarded_signals[] = {SIGTERM, SIGINT, SIGHUP};

sigset_t worker_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : forwarded_signals)
    sigaddset(&set, sig);
  sigaddset(&set, SIGCHLD);
  return set;
}

} // namespace

outcome<void> become_subreaper() {
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL) != 0)
    return errno_failure("prctl(PR_SET_CHILD_SUBREAPER)");
  return {};
}

outcome<sigset_t> block_worker_signals() {
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  for (int sig : forwarded_signals)
    if (::sigaction(sig, &dfl, nullptr) != 0)
      return errno_failure("sigaction");
  if (::sigaction(SIGCHLD, &dfl, nullptr) != 0)
    return errno_failure("sigaction(SIGCHLD)");
  const sigset_t set = worker_signal_set();
  sigset_t previous;
  if (::sigprocmask(SIG_BLOCK, &set, &previous) != 0)
    return errno_failure("sigprocmask");
  return previous;
}

int exit_code_of(int wait_status) noexcept {
  if (WIFEXITED(wait_status))
    return WEXITSTATUS(wait_status);
  if (WIFSIGNALED(wait_status))
    return 128 + WTERMSIG(wait_status);
  return 1;
}

namespace {

/// Reaps every child that has exited; true (and `status`) once the harness
/// is among them.
bool reap_children(pid_t harness, int& harness_status) {
  bool harness_gone = false;
  for (;;) {
    int status = 0;
    const pid_t pid = ::waitpid(-1, &status, WNOHANG);
    if (pid < 0 && errno == EINTR)
      continue;
    if (pid <= 0)
      return harness_gone; // 0: children left, none exited; ECHILD: none at all
    if (pid == harness) {
      harness_status = status;
      harness_gone = true;
    }
  }
}

} // namespace

int supervise_harness(pid_t harness, egress_relay* relay) {
  const sigset_t set = worker_signal_set();
  unique_fd signals{::signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)};
  if (!signals) {
    std::fprintf(stderr, "castellan-worker: signalfd: %s\n", std::strerror(errno));
    return 1;
  }
  int harness_status = -1;
  // A SIGCHLD that arrived before the signalfd existed is still pending and
  // readable from it: nothing is lost.
  for (;;) {
    pollfd fds[2] = {{signals.get(), POLLIN, 0}, {relay ? relay->listen_fd() : -1, POLLIN, 0}};
    const int n = ::poll(fds, relay ? 2 : 1, -1);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      std::fprintf(stderr, "castellan-worker: poll: %s\n", std::strerror(errno));
      return 1;
    }
    if (relay && (fds[1].revents & POLLIN) != 0)
      relay->accept_pending();
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    bool child_event = false;
    for (;;) {
      signalfd_siginfo info{};
      const ssize_t r = ::read(signals.get(), &info, sizeof info);
      if (r != static_cast<ssize_t>(sizeof info))
        break; // EAGAIN: drained
      const int sig = static_cast<int>(info.ssi_signo);
      if (sig == SIGCHLD)
        child_event = true;
      else
        ::kill(harness, sig); // ESRCH: the harness is gone; its SIGCHLD is on its way
    }
    // One SIGCHLD may stand for many exits: reap until none is left.
    if (child_event && reap_children(harness, harness_status))
      return exit_code_of(harness_status);
  }
}

} // namespace castellan::worker
