#pragma once

/// @file decided_call.hpp
/// One seccomp notification while the mediator decides it, and what every
/// family of calls (opens, exec, path calls, network calls) shares to
/// answer it: its name in events, the event itself, and which of the
/// policy's denials are the mediator's to enforce (private to
/// actors/mediation).

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/mediation/mediated_caller.hpp"
#include "actors/mediation/syscall_mediator.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy_event.hpp"

namespace castellan {

namespace mediation {

/// The longest path copied out of a caller (the kernel's own limit).
inline constexpr std::size_t max_path = 4095;

/// The name of a decided system call ("unlinkat"), "unknown" otherwise.
const char* syscall_name(int nr);

/// The permissions an open for reading needs: the ones whose denial ends
/// the worker instead of failing the call (optimistic reads).
inline constexpr policy::fs_access read_only_perms =
    policy::to_access(policy::fs_perm::read_file) | policy::to_access(policy::fs_perm::read_dir);

/// The permissions that apply to a file itself (as opposed to a directory's
/// entries): what a hard link or a renamed file carries with it.
inline constexpr policy::fs_access file_perms =
    policy::to_access(policy::fs_perm::execute) | policy::to_access(policy::fs_perm::write_file) |
    policy::to_access(policy::fs_perm::read_file) | policy::to_access(policy::fs_perm::truncate) |
    policy::to_access(policy::fs_perm::ioctl_dev);

/// A decision whose deny comes from the domain default, turned into an
/// allow: the static layers enforce the default (see the callers).
policy::decision rules_only(const policy::decision& d);

/// The event a decided call reports (syscall_denied, policy_warning,
/// optimistic_violation), stamped now.
policy_event make_event(event_kind kind, const char* syscall, std::string target,
                        policy::action verdict, std::string_view rule, pid_t pid);

} // namespace mediation

/// One notification being decided, and how it is answered.
struct syscall_mediator::call {
  platform::notification n;
  const char* name = "unknown";
  std::chrono::steady_clock::time_point received;
  mediated_worker* w = nullptr;
  mediation_result* r = nullptr;
  /// The caller, addressed through its own handles (mediated_caller.hpp).
  mediation::mediated_caller caller;

  platform::notify_listener& listener() const { return *w->listener; }

  /// The kernel's own kind of answer (an errno the call would have had
  /// anyway): nothing to report.
  void fail(int err) const {
    (void)listener().respond_error(n.id, err);
    r->what = mediation_result::outcome::allow;
  }
  /// The call returns `value` (after the supervisor performed it).
  void succeed(int64_t value) const {
    if (!listener().respond_value(n.id, value))
      r->what = mediation_result::outcome::gone;
  }
  /// The caller went away, or its call was answered already.
  void gone() const { r->what = mediation_result::outcome::gone; }
  /// Still waiting? Call after copying the arguments and before acting:
  /// from then on the caller is reached through its handles only, and a
  /// further read of its memory is checked again.
  bool still_waiting() {
    if (!caller.still_waiting())
      return false;
    caller.mark_checked();
    return true;
  }
};

} // namespace castellan
