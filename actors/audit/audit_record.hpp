#pragma once

/// @file audit_record.hpp
/// The JSON-lines record schema (version 1, docs/audit.md): how each audit
/// event becomes one line `{"v":1,"ts":"…","kind":"…","seq":N,…}`. No CAF.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/audit/audit_kind.hpp"
#include "actors/audit/audit_messages.hpp"

namespace castellan {

/// The `v` field of every record. Bumped only for incompatible changes;
/// adding fields keeps it.
inline constexpr int audit_schema_version = 1;

/// Strings that come from the sandbox (paths, argv, reasons) are cut to this
/// many bytes so one hostile event cannot make a record unbounded.
inline constexpr size_t audit_max_field_bytes = 4096;
/// At most this many argv entries (or policy errors) are recorded.
inline constexpr size_t audit_max_list_entries = 256;

/// One encoded record and what routing and filtering need without parsing it.
struct audit_record {
  audit_kind kind = audit_kind::policy_event;
  int64_t timestamp_ns = 0;
  uint64_t seq = 0;
  uint64_t exec_id = 0;
  std::string pool;
  std::string json; ///< one line, no trailing newline
};

/// The kind an event is recorded as, and the syscall `audit.events` can
/// select it by (empty if none).
audit_kind kind_of(const exec_started& x);
audit_kind kind_of(const exec_finished& x);
audit_kind kind_of(const security_event& x);
audit_kind kind_of(const worker_lost_event& x);
audit_kind kind_of(const policy_rejection& x);
audit_kind kind_of(const connection_record& x);
audit_kind kind_of(const session_record& x);
std::string_view syscall_of(const security_event& x);
std::string_view syscall_of(const connection_record& x);

/// Encodes an event as record number `seq`. A zero timestamp becomes `now_ns`.
audit_record encode(const exec_started& x, uint64_t seq, int64_t now_ns);
audit_record encode(const exec_finished& x, uint64_t seq, int64_t now_ns);
audit_record encode(const security_event& x, uint64_t seq, int64_t now_ns);
audit_record encode(const worker_lost_event& x, uint64_t seq, int64_t now_ns);
audit_record encode(const policy_rejection& x, uint64_t seq, int64_t now_ns);
audit_record encode(const connection_record& x, uint64_t seq, int64_t now_ns);
audit_record encode(const session_record& x, uint64_t seq, int64_t now_ns);

/// A `drop_report`: `sink` lost `dropped` records since its last report,
/// `dropped_total` since the audit actor started.
audit_record encode_drop_report(std::string_view sink, uint64_t dropped, uint64_t dropped_total,
                                uint64_t seq, int64_t now_ns);

/// The entry a subscriber receives for `rec`.
audit_entry to_entry(const audit_record& rec);

/// Whether `rec` passes a subscriber's filter.
bool matches(const audit_filter& filter, const audit_record& rec);

} // namespace castellan
