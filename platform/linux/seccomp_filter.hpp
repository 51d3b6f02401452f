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

#include <linux/filter.h>

#include <memory>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::platform {

struct compiled_seccomp;

struct seccomp_spec {
  bool enabled = true;
  std::vector<std::string> deny; ///< fail with `deny_errno`, in addition to the anti-escape set
  std::vector<std::string> kill; ///< kill the process (SIGSYS); wins over deny
  int deny_errno = 1;            ///< EPERM
  /// The filters above compiled ahead of time (compile_seccomp), so that a
  /// new worker only loads them; shared by every worker of a pool.
  std::shared_ptr<const compiled_seccomp> compiled;
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

/// The two BPF programs of a seccomp_spec and what they do. Building them
/// (libseccomp's rule compiler, the table of known system calls) takes over
/// a millisecond; loading them takes two system calls.
struct compiled_seccomp {
  std::vector<sock_filter> rules; ///< libseccomp's: the anti-escape set and the policy's rules
  std::vector<sock_filter> guard; ///< architecture, x32, personality, numbers above the table
  seccomp_report report;          ///< `enforced` and `no_new_privs` are set when loaded
};

/// The anti-escape set (names; some are argument-filtered, see `arguments`).
const std::vector<std::string>& anti_escape_syscalls();

/// The BPF program of a libseccomp filter context (`scmp_filter_ctx`),
/// exported to memory (libseccomp 2.5 exports to a file descriptor only).
outcome<std::vector<sock_filter>> export_bpf(void* seccomp_ctx);

/// Compiles `spec` (which must be enabled). An unknown name in the spec is
/// an error.
outcome<compiled_seccomp> compile_seccomp(const seccomp_spec& spec);

/// Sets no_new_privs and loads the filters on this thread (before any other
/// thread exists: the filter is inherited by children, not other threads).
/// Irreversible. A program the kernel refuses is an error.
outcome<seccomp_report> load_seccomp(const compiled_seccomp& filters);

/// Loads spec.compiled when it is set, else compiles `spec` and loads it;
/// nothing when the spec is disabled.
outcome<seccomp_report> apply_seccomp(const seccomp_spec& spec);

} // namespace castellan::platform
