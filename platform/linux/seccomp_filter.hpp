#pragma once

/// @file seccomp_filter.hpp
/// The worker's seccomp filter: default allow, with an anti-escape set that
/// always applies plus the policy's own denials and kills.
///
/// Two filters are loaded (libseccomp's, then a small hand-written one):
/// - the anti-escape set and the policy's rules (EPERM, or kill);
/// - syscall numbers above the highest one libseccomp 2.5 can name return
///   ENOSYS (a default-allow filter must not let through system calls newer
///   than itself), and x32 numbers and every non-native architecture (i386
///   via int 0x80) kill the process.

#include <string>
#include <vector>

#include "ipc/result.hpp"

namespace castellan::platform {

struct seccomp_spec {
  bool enabled = true;
  std::vector<std::string> deny; ///< fail with `deny_errno`, in addition to the anti-escape set
  std::vector<std::string> kill; ///< kill the process (SIGSYS); wins over deny
  int deny_errno = 1;            ///< EPERM
};

struct seccomp_report {
  bool enforced = false;
  std::string mode = "disabled"; ///< "filter"
  bool no_new_privs = false;
  std::vector<std::string> denied;   ///< every syscall that fails with deny_errno (always, or for some arguments)
  std::vector<std::string> killed;   ///< every syscall that kills the process
  std::vector<std::string> not_on_this_arch; ///< names skipped: not system calls of this architecture
  int highest_allowed_nr = 0;        ///< numbers above return ENOSYS
  std::string arguments;             ///< the argument-filtered rules, in words
};

/// The anti-escape set (names; some are argument-filtered, see `arguments`).
const std::vector<std::string>& anti_escape_syscalls();

/// Sets no_new_privs and loads the filters on this thread (before any other
/// thread exists: the filter is inherited by children, not other threads).
/// Irreversible. An unknown name in the spec is an error.
outcome<seccomp_report> apply_seccomp(const seccomp_spec& spec);

} // namespace castellan::platform
