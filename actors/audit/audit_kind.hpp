#pragma once

/// @file audit_kind.hpp
/// The kinds of audit records and the rule that decides which are recorded:
/// the always-on kinds, plus what the policy's `audit.events` selects when
/// `audit.enabled` is set. Pure functions, no CAF.

#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "actors/policy_event.hpp"

namespace castellan {

/// The `kind` field of an audit record.
enum class audit_kind : uint8_t {
  exec_start,
  exec_end,
  syscall_denied,
  policy_warning,
  optimistic_violation,
  policy_event, ///< a security event whose kind this build does not know
  policy_rejected,
  timeout,
  oom,
  worker_lost,
  connection,
  drop_report,
  session,
};

/// Every kind, in declaration order (for docs, tests and `--kind` validation).
inline constexpr audit_kind all_audit_kinds[] = {
    audit_kind::exec_start,
    audit_kind::exec_end,
    audit_kind::syscall_denied,
    audit_kind::policy_warning,
    audit_kind::optimistic_violation,
    audit_kind::policy_event,
    audit_kind::policy_rejected,
    audit_kind::timeout,
    audit_kind::oom,
    audit_kind::worker_lost,
    audit_kind::connection,
    audit_kind::drop_report,
    audit_kind::session,
};

/// The record's `kind` text ("exec_start", "syscall_denied", …).
std::string_view kind_name(audit_kind x);
/// Parses a kind name; false if unknown.
bool from_string(std::string_view name, audit_kind& out);

/// The kind of a `policy_event`; a value this build does not know (from
/// another node) maps to `audit_kind::policy_event`, which is always recorded
/// (a security event this build does not know is never silently filtered).
audit_kind security_kind(event_kind kind);

/// True for the kinds recorded whatever the policy says: denials, optimistic
/// violations, rejected policies, timeouts, OOM kills, lost workers, unknown
/// security events, the audit's own drop reports and sessions' lives.
bool always_recorded(audit_kind x);

/// Whether a record of kind `x` is written. `events` holds the policy's
/// audit.events names: a kind name ("exec_start"), "*" or "all" for every
/// kind, or a syscall name ("openat", "connect") that selects the events about
/// that syscall. `syscall` is the record's syscall ("connect" for connection
/// records, empty when the record has none).
bool should_record(bool enabled, const std::set<std::string>& events, audit_kind x,
                   std::string_view syscall = {});

} // namespace castellan
