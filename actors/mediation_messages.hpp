#pragma once

/// @file mediation_messages.hpp
/// What the pool's event source tells the pool about the system calls it
/// decided through seccomp user notification. One type per outcome, so a
/// receiver (the pool, a remote collector) can tell them apart by type; each
/// carries the worker and the policy_event that also goes into the exec's
/// result and to audit (pid, syscall, path or address, rule pointer, time).

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

#include "actors/exec_messages.hpp"

namespace castellan {

/// A synchronous decision refused a call (EACCES, or EPERM where that is
/// the convention): the process got the errno and keeps running.
struct syscall_denied {
  uint64_t worker_id = 0;
  std::string policy;
  int32_t errno_value = 0;
  policy_event event; ///< kind "syscall_denied", decision "deny"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, syscall_denied& x) {
  return f(caf::meta::type_name("syscall_denied"), x.worker_id, x.policy, x.errno_value,
           x.event);
}

/// A `warn` decision: the call went ahead and is reported.
struct policy_warning {
  uint64_t worker_id = 0;
  std::string policy;
  policy_event event; ///< kind "policy_warning", decision "warn"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_warning& x) {
  return f(caf::meta::type_name("policy_warning"), x.worker_id, x.policy, x.event);
}

/// An optimistic read was answered at once and the check after it denied
/// it: the worker has been killed (the exec ends as policy_kill).
struct optimistic_violation {
  uint64_t worker_id = 0;
  std::string policy;
  policy_event event; ///< kind "optimistic_violation", decision "kill"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, optimistic_violation& x) {
  return f(caf::meta::type_name("optimistic_violation"), x.worker_id, x.policy, x.event);
}

} // namespace castellan
