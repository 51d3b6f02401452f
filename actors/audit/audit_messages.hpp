#pragma once

/// @file audit_messages.hpp
/// The messages of the audit actor: the security-relevant events it records,
/// its configuration, the entries it delivers to subscribers and its
/// statistics. Plain structs with `inspect()`, so they cross nodes (a remote
/// pool audits through the front node's audit actor).

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include <caf/meta/type_name.hpp>

#include "actors/exec_messages.hpp"

namespace castellan {

// -- events ---------------------------------------------------------------------

/// An exec was handed to a worker. The code itself is never recorded (it can
/// be large and secret); its sha256 and size identify it.
struct exec_started {
  uint64_t exec_id = 0;
  std::string pool;
  uint64_t worker_id = 0;
  std::string policy;            ///< name of the pool's policy
  std::string code_sha256;       ///< hex, code mode; empty in command mode
  uint64_t code_size = 0;        ///< bytes of code, code mode
  std::vector<std::string> argv; ///< command mode; empty in code mode
  int64_t timestamp_ns = 0;      ///< CLOCK_REALTIME; 0: the audit actor stamps it
  /// The revision of `policy` the exec runs under (the policy actor's count
  /// of its reloads); 0 when the policy has none (built in, a request's own).
  uint64_t policy_revision = 0;
  /// Who asked (exec_request::origin).
  exec_origin origin;
  /// The names of the variables the request set; never their values, which
  /// may be secrets.
  std::vector<std::string> env_names;
  std::string cwd;         ///< the request's working directory; empty: the worker's
  uint64_t stdin_size = 0; ///< bytes the request gave on stdin
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, exec_started& x) {
  return f(caf::meta::type_name("exec_started"), x.exec_id, x.pool, x.worker_id, x.policy,
           x.code_sha256, x.code_size, x.argv, x.timestamp_ns, x.policy_revision, x.origin,
           x.env_names, x.cwd, x.stdin_size);
}

/// An exec ended, however it ended. A `timeout`, `oom` or `worker_lost` error
/// class makes it a record of that kind (always recorded); any other class a
/// plain `exec_end` record (recorded when the policy's audit selects it).
struct exec_finished {
  uint64_t exec_id = 0;
  std::string pool;
  uint64_t worker_id = 0;
  std::string policy;
  error_class error = error_class::ok;
  int32_t exit_code = 0;
  exec_timing timing;
  resource_usage usage;
  std::string detail;       ///< castellan's explanation (exec_result::detail)
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME; 0: the audit actor stamps it
  uint64_t policy_revision = 0; ///< as exec_started::policy_revision
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, exec_finished& x) {
  return f(caf::meta::type_name("exec_finished"), x.exec_id, x.pool, x.worker_id, x.policy, x.error,
           x.exit_code, x.timing, x.usage, x.detail, x.timestamp_ns, x.policy_revision);
}

/// A policy decision worth recording (`event.kind` is `syscall_denied`,
/// `policy_warning` or `optimistic_violation`) with the exec it happened in.
struct security_event {
  uint64_t exec_id = 0;
  std::string pool;
  uint64_t worker_id = 0;
  std::string policy;
  policy_event event; ///< its timestamp_ns is the record's time (0: now)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, security_event& x) {
  return f(caf::meta::type_name("security_event"), x.exec_id, x.pool, x.worker_id, x.policy,
           x.event);
}

/// A worker died or broke the wire protocol while no exec was running on it
/// (a loss during an exec is an `exec_finished` with `error_class::worker_lost`).
struct worker_lost_event {
  std::string pool;
  uint64_t worker_id = 0;
  int32_t pid = 0;
  uint64_t exec_id = 0; ///< 0: the worker was idle
  std::string reason;   ///< "crashed", "protocol violation: …", "killed by signal 9"
  int64_t timestamp_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_lost_event& x) {
  return f(caf::meta::type_name("worker_lost_event"), x.pool, x.worker_id, x.pid, x.exec_id,
           x.reason, x.timestamp_ns);
}

/// A policy was refused at load or reload. Same fields as the policy actor's
/// `policy_rejected`; `make_policy_rejection()` converts one into this.
struct policy_rejection {
  std::string policy_name;
  std::string path;
  std::vector<std::string> errors; ///< "JSON pointer: reason" each
  int64_t timestamp_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_rejection& x) {
  return f(caf::meta::type_name("policy_rejection"), x.policy_name, x.path, x.errors,
           x.timestamp_ns);
}

/// A session's life: created, ended (its worker died), reaped (idle TTL or
/// maximum lifetime), destroyed, or refused at creation (actors/session).
struct session_record {
  std::string session_id;
  std::string owner; ///< who created it (session_options::owner)
  std::string pool;  ///< the pool whose configuration it was created from
  std::string event; ///< "created", "create_failed", "refused", "ended", "reaped", "destroyed"
  std::string reason;
  int32_t worker_pid = 0; ///< its worker, in the supervisor's pid namespace (0: none)
  uint64_t execs = 0;     ///< execs answered in it so far
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME; 0: the audit actor stamps it
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_record& x) {
  return f(caf::meta::type_name("session_record"), x.session_id, x.owner, x.pool, x.event,
           x.reason, x.worker_pid, x.execs, x.timestamp_ns);
}

/// Converts any struct with the fields of `policy_rejected` (policy_name, path,
/// errors, timestamp_ns) — the policy actor's message — into an audit event,
/// so that audit does not depend on the policy actor's headers.
template <class PolicyRejected> policy_rejection make_policy_rejection(const PolicyRejected& x) {
  return policy_rejection{x.policy_name, x.path, x.errors, x.timestamp_ns};
}

/// One connection a sandbox asked the egress proxy for (issue 8).
struct connection_record {
  uint64_t exec_id = 0;
  std::string pool;
  uint64_t worker_id = 0;
  std::string host;    ///< as requested (CONNECT host or Host header)
  std::string address; ///< the resolved address that was decided on
  uint16_t port = 0;
  std::string decision;   ///< "allow", "deny", "warn"
  std::string rule;       ///< JSON pointer of the deciding rule, or "default"
  uint64_t bytes_out = 0; ///< sandbox → remote
  uint64_t bytes_in = 0;  ///< remote → sandbox
  uint64_t duration_us = 0;
  int64_t timestamp_ns = 0; ///< when the connection was decided
  std::string method; ///< "CONNECT" for a tunnel, else the HTTP method forwarded
  std::string reason; ///< one line: why it was denied, or how it ended
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, connection_record& x) {
  return f(caf::meta::type_name("connection_record"), x.exec_id, x.pool, x.worker_id, x.host,
           x.address, x.port, x.decision, x.rule, x.bytes_out, x.bytes_in, x.duration_us,
           x.timestamp_ns, x.method, x.reason);
}

// -- configuration ----------------------------------------------------------------

/// When the file sink makes its writes durable.
enum class fsync_policy : uint8_t {
  never,        ///< leave it to the kernel (fastest; a crash may lose seconds)
  interval,     ///< fdatasync every `fsync_interval_ms` while there is unsynced data
  every_record, ///< fdatasync after every write: nothing written is left unsynced
};

/// "never", "interval", "every_record".
std::string to_string(fsync_policy x);
/// Parses a name of `to_string(fsync_policy)`; false if unknown.
bool from_string(const std::string& name, fsync_policy& out);

/// The JSON-lines file sink. An empty `path` means no file sink.
struct file_sink_config {
  std::string path;
  uint64_t max_bytes = 64ull << 20; ///< rotate before a write would exceed it; 0: never
  uint32_t max_files = 5;           ///< rotated files kept: path.1 … path.max_files
  fsync_policy fsync = fsync_policy::interval;
  uint32_t fsync_interval_ms = 1000;
  uint32_t queue_records = 8192;      ///< writer queue bound, in records
  uint64_t queue_bytes = 16ull << 20; ///< writer queue bound, in bytes
  uint32_t block_timeout_ms = 10000;  ///< how long a full queue blocks the actor
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, file_sink_config& x) {
  return f(caf::meta::type_name("file_sink_config"), x.path, x.max_bytes, x.max_files, x.fsync,
           x.fsync_interval_ms, x.queue_records, x.queue_bytes, x.block_timeout_ms);
}

/// What the audit actor records and where. Sent at spawn and again (as a
/// message) to reconfigure; the policy's `audit` section maps onto `enabled`
/// and `events`.
struct audit_config {
  bool enabled = false;         ///< policy audit.enabled
  std::set<std::string> events; ///< policy audit.events (see docs/audit.md)
  file_sink_config file;
  bool to_stdout = false;                ///< also write each record to stdout
  bool to_stderr = false;                ///< also write each record to stderr
  uint32_t subscriber_window = 256;      ///< unanswered entries per subscriber before drops
  uint32_t subscriber_timeout_ms = 5000; ///< an entry unanswered this long counts as answered
  uint32_t report_interval_ms = 1000;    ///< how often drops and counts are reported
  /// Events each producer that joins may have unacknowledged (audit_credits.hpp).
  uint32_t producer_window = 2048;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, audit_config& x) {
  return f(caf::meta::type_name("audit_config"), x.enabled, x.events, x.file, x.to_stdout,
           x.to_stderr, x.subscriber_window, x.subscriber_timeout_ms, x.report_interval_ms,
           x.producer_window);
}

// -- subscribers ------------------------------------------------------------------

/// What a subscriber wants: records of these kinds (empty: all), of this exec
/// (0: any) and of this pool (empty: any).
struct audit_filter {
  std::set<std::string> kinds;
  uint64_t exec_id = 0;
  std::string pool;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, audit_filter& x) {
  return f(caf::meta::type_name("audit_filter"), x.kinds, x.exec_id, x.pool);
}

/// One record as delivered to a subscriber: the JSON line of docs/audit.md
/// plus the fields needed to route it without parsing. Sent as a request; the
/// subscriber's reply (any, or none from a `void` handler) returns its credit.
struct audit_entry {
  uint64_t seq = 0;
  std::string kind;
  int64_t timestamp_ns = 0;
  uint64_t exec_id = 0;
  std::string pool;
  std::string json; ///< the record, one line, no trailing newline
  /// Entries this subscriber's filter selected but that were dropped (its
  /// window was full) since the previous entry it was sent: it learns of
  /// its losses with the next entry that reaches it.
  uint64_t dropped = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, audit_entry& x) {
  return f(caf::meta::type_name("audit_entry"), x.seq, x.kind, x.timestamp_ns, x.exec_id, x.pool,
           x.json, x.dropped);
}

// -- statistics -----------------------------------------------------------------

/// The audit actor's counters (reply to `status_atom` and to a reconfiguration).
struct audit_stats {
  uint64_t received = 0;     ///< events received
  uint64_t recorded = 0;     ///< records produced (after filtering, drop reports included)
  uint64_t filtered = 0;     ///< events the configuration did not select
  uint64_t file_written = 0; ///< records written to the file sink
  uint64_t file_dropped = 0; ///< records the file sink could not take (stalled or failing)
  uint64_t file_rotations = 0;
  uint64_t file_fsyncs = 0;
  uint64_t file_write_errors = 0;
  uint64_t queue_high_water = 0; ///< most records ever waiting in the writer queue
  uint64_t queue_capacity = 0;   ///< its bound
  uint64_t subscriber_dropped = 0;
  uint64_t subscribers = 0;
  std::string last_error; ///< the file sink's last failure, if any
  uint64_t producers = 0;        ///< producers joined (audit_credits.hpp)
  uint64_t credits_withheld = 0; ///< events handled whose credits are not yet returned
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, audit_stats& x) {
  return f(caf::meta::type_name("audit_stats"), x.received, x.recorded, x.filtered, x.file_written,
           x.file_dropped, x.file_rotations, x.file_fsyncs, x.file_write_errors, x.queue_high_water,
           x.queue_capacity, x.subscriber_dropped, x.subscribers, x.last_error, x.producers,
           x.credits_withheld);
}

} // namespace castellan
