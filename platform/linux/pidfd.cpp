#include "platform/linux/pidfd.hpp"

#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

namespace castellan::platform {

std::string exit_status::describe() const {
  if (signaled) {
    const char* name = sigabbrev_np(signal);
    return std::string("killed by SIG") + (name ? name : std::to_string(signal));
  }
  return "exited with " + std::to_string(code);
}

outcome<void> pidfd_signal(int pidfd, int sig) {
  if (::syscall(SYS_pidfd_send_signal, pidfd, sig, nullptr, 0) == 0 || errno == ESRCH)
    return {};
  return errno_failure("pidfd_send_signal");
}

namespace {

outcome<std::optional<exit_status>> reap(int pidfd, int flags) {
  siginfo_t info;
  std::memset(&info, 0, sizeof info);
  int rc;
  do {
    rc = ::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info,
                  WEXITED | flags);
  } while (rc < 0 && errno == EINTR);
  if (rc < 0)
    return errno_failure("waitid(P_PIDFD)");
  if (info.si_pid == 0)
    return std::optional<exit_status>{};
  exit_status st;
  st.signaled = info.si_code == CLD_KILLED || info.si_code == CLD_DUMPED;
  if (st.signaled)
    st.signal = info.si_status;
  else
    st.code = info.si_status;
  return std::optional<exit_status>{st};
}

} // namespace

outcome<std::optional<exit_status>> pidfd_try_reap(int pidfd) {
  return reap(pidfd, WNOHANG);
}

outcome<exit_status> pidfd_reap(int pidfd) {
  auto st = reap(pidfd, 0);
  if (!st)
    return st.error();
  return **st;
}

} // namespace castellan::platform
