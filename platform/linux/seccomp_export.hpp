#pragma once

/// @file seccomp_export.hpp
/// A seccomp filter as bytes: built here with libseccomp, installed by
/// another process on itself (`prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER)`).
/// The kernel runs every filter a process has and the most restrictive
/// answer wins, so an extra filter can only take rights away: it is how a
/// process forked from a warm worker narrows itself to a stricter policy.

#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// A default-allow classic-BPF program for this architecture.
struct exported_filter {
  /// The `struct sock_filter` array (8 bytes per instruction), ready for
  /// `struct sock_fprog`. Includes the architecture check (a call of any
  /// other architecture kills the process).
  std::string program;
  std::vector<std::string> denied;           ///< fail with the chosen errno
  std::vector<std::string> killed;           ///< kill the process (SIGSYS); wins over deny
  std::vector<std::string> not_on_this_arch; ///< names skipped: no such call here
};

/// The filter that makes `deny` fail with `deny_errno` and `kill` kill the
/// process, everything else allowed. An unknown name is an error naming it.
outcome<exported_filter> export_seccomp_filter(const std::vector<std::string>& deny,
                                               const std::vector<std::string>& kill,
                                               int deny_errno = 1 /* EPERM */);

} // namespace castellan::platform
