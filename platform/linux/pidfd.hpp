#pragma once

/// @file pidfd.hpp
/// Process handles that cannot be confused by pid reuse.

#include <optional>
#include <string>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// How a process ended.
struct exit_status {
  bool signaled = false;
  int code = 0;   ///< exit code when !signaled
  int signal = 0; ///< terminating signal when signaled

  /// Shell convention: the exit code, or 128 + signal.
  int shell_code() const noexcept { return signaled ? 128 + signal : code; }
  /// "exited with 3", "killed by SIGKILL".
  std::string describe() const;
};

/// Sends `sig` through the pidfd. ESRCH (already gone) is success.
outcome<void> pidfd_signal(int pidfd, int sig);

/// Reaps the process if it has exited; nothing if it is still running.
outcome<std::optional<exit_status>> pidfd_try_reap(int pidfd);

/// Waits for the process to exit and reaps it.
outcome<exit_status> pidfd_reap(int pidfd);

} // namespace castellan::platform
