/// @file reaper.cpp
/// Signal forwarding and reaping through sigwaitinfo: no handlers, so no
/// async-signal-safety concerns and no lost SIGCHLD.

#include "worker/reaper.hpp"

#include <sys/prctl.h>
#include <sys/wait.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

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

int supervise_harness(pid_t harness) {
  const sigset_t set = worker_signal_set();
  for (;;) {
    siginfo_t info{};
    const int sig = ::sigwaitinfo(&set, &info);
    if (sig < 0) {
      if (errno == EINTR)
        continue;
      std::fprintf(stderr, "castellan-worker: sigwaitinfo: %s\n", std::strerror(errno));
      return 1;
    }
    if (sig != SIGCHLD) {
      // ESRCH: the harness is already gone; its SIGCHLD is on its way.
      ::kill(harness, sig);
      continue;
    }
    // One SIGCHLD may stand for many exits: reap until none is left.
    int harness_status = -1;
    for (;;) {
      int status = 0;
      const pid_t pid = ::waitpid(-1, &status, WNOHANG);
      if (pid < 0 && errno == EINTR)
        continue;
      if (pid <= 0)
        break; // 0: children left, none exited; ECHILD: no children at all
      if (pid == harness)
        harness_status = status;
    }
    if (harness_status != -1)
      return exit_code_of(harness_status);
  }
}

} // namespace castellan::worker
