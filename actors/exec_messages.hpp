#pragma once

/// @file exec_messages.hpp
/// The messages of the exec path: a request, its result, worker state events
/// and status snapshots. Plain structs with `inspect()`, so they cross nodes.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/policy_event.hpp"

namespace castellan {

/// How an exec ended. The exit code says what the code did; this says what
/// castellan did about it.
enum class error_class : uint8_t {
  ok,             ///< ran to the end (exit code may still be non-zero)
  exception,      ///< an uncaught exception
  timeout,        ///< deadline reached, worker killed, exit code 124
  cancelled,      ///< cancelled by request, worker killed, exit code 125
  limit_exceeded, ///< a limit refused the request before it ran
  policy_kill,    ///< an optimistic check failed and the worker was killed
  oom,            ///< the worker's memory limit was hit
  worker_lost,    ///< the worker died or broke the wire protocol
  busy,           ///< the pool's queue was full
};

/// The wire name ("ok", "exception", …).
std::string to_string(error_class x);
/// Parses a wire name; false if unknown.
bool from_string(std::string_view name, error_class& out);

/// The uncaught exception of an exec, as the interpreter reported it.
struct exception_info {
  std::string type;
  std::string message;
  std::string traceback;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exception_info& x) {
  return f(caf::meta::type_name("exception_info"), x.type, x.message, x.traceback);
}

/// Where an exec's time went, in microseconds.
struct exec_timing {
  uint64_t queue_us = 0; ///< from arrival at the pool to dispatch to a worker
  uint64_t run_us = 0;   ///< from dispatch to the result
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_timing& x) {
  return f(caf::meta::type_name("exec_timing"), x.queue_us, x.run_us);
}

/// What an exec consumed (from the worker's cgroup where there is one).
struct resource_usage {
  uint64_t cpu_us = 0;
  uint64_t peak_memory_bytes = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, resource_usage& x) {
  return f(caf::meta::type_name("resource_usage"), x.cpu_us, x.peak_memory_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_event& x) {
  return f(caf::meta::type_name("policy_event"), x.kind, x.syscall, x.target, x.decision,
           x.rule, x.pid, x.timestamp_ns);
}

/// Who asked for an exec through the API, as audit records name it
/// (docs/audit.md). Empty for the embedding program's own execs.
struct exec_origin {
  /// The connection: "unix uid=U gid=G pid=P" (the peer's credentials when
  /// it connected, from the kernel) or "tcp ADDR:PORT".
  std::string peer;
  /// The name of the bearer token the request carried; empty: none.
  std::string token;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_origin& x) {
  return f(caf::meta::type_name("exec_origin"), x.peer, x.token);
}

/// A file written into the sandbox before an exec runs (exec_request::files_in).
struct exec_file_in {
  /// Relative to the exec's working directory (its cwd, else /tmp), or
  /// absolute; either way below /tmp or the cwd, with no `..` (docs/api.md).
  std::string path;
  std::string content;
  uint32_t mode = 0644; ///< permission bits (at most 0777)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_file_in& x) {
  return f(caf::meta::type_name("exec_file_in"), x.path, x.content, x.mode);
}

/// A file an exec left, read back after it ended (exec_request::files_out),
/// or why it could not be.
struct exec_file_out {
  std::string path;    ///< as the request named it
  std::string content; ///< the file's bytes, when `error` is empty
  uint64_t size = 0;   ///< the file's size (also when it is too large)
  /// Empty, or why there is no content: "missing", "not_regular" (a
  /// directory, a symlink, a FIFO, a device, a /proc file), "too_large",
  /// "unreadable", "not_collected" (the exec did not run to the point
  /// where files are read, or ended while this one was being sent back).
  std::string error;
  std::string message; ///< the error for people, with the limit it hit
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_file_out& x) {
  return f(caf::meta::type_name("exec_file_out"), x.path, x.content, x.size, x.error, x.message);
}

/// Run Python `code`, or, when `argv` is not empty, the command `argv`.
struct exec_request {
  uint64_t exec_id = 0;    ///< 0: the supervisor assigns one
  std::string code;        ///< Python source (code mode)
  std::vector<std::string> argv; ///< program and arguments (command mode)
  uint64_t timeout_ms = 0; ///< 0: the pool's default
  std::string pool;        ///< empty: the default pool
  /// A policy for this request only, as JSON text (docs/policies.md,
  /// "Request policies"); empty: the pool's. The supervisor validates it and
  /// runs the request in the pool of that policy, or, in a fork-mode pool
  /// whose policy it tightens, on that pool with the tightening applied in
  /// the exec's process.
  std::string policy;
  /// Environment variables for this exec, "NAME=VALUE" each, set over the
  /// worker's own (a later entry for a name wins). For code, os.environ; for
  /// a command, the program's environment.
  std::vector<std::string> env;
  /// The working directory the code or program starts in, an absolute path
  /// inside the sandbox; empty: the worker's.
  std::string cwd;
  /// What the exec reads on stdin (fd 0 and sys.stdin); empty: nothing.
  std::string stdin_data;
  /// Where the exec's output also goes as it is written, as
  /// (exec_output_atom, exec_output) messages from the pool, in order; the
  /// result still carries all of it. The code's stdout and stderr are then
  /// line-buffered and the worker hands over each piece at once. Null: the
  /// output comes with the result only.
  caf::actor output_sink;
  /// Who asked (set by the API; the embedding program may leave it empty).
  exec_origin origin;
  /// Files written before the code runs (before the working directory is
  /// entered, in the process that runs the exec); a file that cannot be
  /// written runs nothing (exit code 126). They are removed once the exec
  /// ends.
  std::vector<exec_file_in> files_in;
  /// Files read back once the exec has ended, into exec_result::files, in
  /// this order (paths as for files_in).
  std::vector<std::string> files_out;
  // -- set by the supervisor (whatever a client puts here is replaced) --------
  /// The TIGHTEN frame's payload (docs/wire.md) the pool sends before the
  /// code; empty: none.
  std::string tightening;
  /// The policy audit records name for this exec; empty: the pool's.
  std::string policy_name;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_request& x) {
  return f(caf::meta::type_name("exec_request"), x.exec_id, x.code, x.argv, x.timeout_ms, x.pool,
           x.policy, x.env, x.cwd, x.stdin_data, x.output_sink, x.origin, x.files_in,
           x.files_out, x.tightening,
           x.policy_name);
}

/// A piece of an exec's output as it was written (exec_request::output_sink).
struct exec_output {
  uint64_t exec_id = 0;
  bool is_stderr = false;
  std::string data;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_output& x) {
  return f(caf::meta::type_name("exec_output"), x.exec_id, x.is_stderr, x.data);
}

/// Everything castellan knows about one finished exec.
struct exec_result {
  uint64_t exec_id = 0;
  int32_t exit_code = 0;
  error_class error = error_class::ok;
  std::string stdout_data;
  std::string stderr_data;
  bool stdout_truncated = false;
  bool stderr_truncated = false;
  bool has_exception = false;
  exception_info exception; ///< valid when has_exception
  std::vector<policy_event> events;
  exec_timing timing;
  resource_usage usage;
  uint64_t worker_id = 0;
  std::string detail; ///< castellan's own explanation (busy, worker_lost, …)
  /// The worker's sandbox as one JSON object: per layer what was requested
  /// and what is in force (namespaces, network, cgroup, root, Landlock,
  /// seccomp, capabilities; platform/linux/enforcement_report.hpp). Empty
  /// when no worker ran the request, or it was not sandboxed.
  std::string enforcement;
  /// One entry per exec_request::files_out path, in its order.
  std::vector<exec_file_out> files;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_result& x) {
  return f(caf::meta::type_name("exec_result"), x.exec_id, x.exit_code, x.error, x.stdout_data,
           x.stderr_data, x.stdout_truncated, x.stderr_truncated, x.has_exception, x.exception,
           x.events, x.timing, x.usage, x.worker_id, x.detail, x.enforcement, x.files);
}

/// A worker's life: starting → ready → running → ready … → stopped.
enum class worker_state : uint8_t { starting, ready, running, stopped };

std::string to_string(worker_state x);

/// Published by the supervisor to its subscribers on every state transition.
struct worker_state_event {
  std::string pool;
  uint64_t worker_id = 0;
  int32_t pid = 0;
  worker_state state = worker_state::starting;
  std::string reason;       ///< why it stopped (recycled, killed, crashed, …)
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_state_event& x) {
  return f(caf::meta::type_name("worker_state_event"), x.pool, x.worker_id, x.pid, x.state,
           x.reason, x.timestamp_ns);
}

/// A pool's occupancy and counters at one instant.
struct pool_status {
  std::string name;
  uint32_t size = 0;        ///< workers alive (any state)
  uint32_t idle = 0;
  uint32_t busy = 0;
  uint32_t starting = 0;
  uint32_t queued = 0;
  uint32_t queue_limit = 0;
  uint64_t spawned = 0;
  uint64_t completed = 0;
  uint64_t lost = 0;
  /// The policy new workers start under (followed by name, see
  /// pool_config::policies) and its revision; empty / 0 without one.
  std::string policy;
  uint64_t policy_revision = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, pool_status& x) {
  return f(caf::meta::type_name("pool_status"), x.name, x.size, x.idle, x.busy, x.starting,
           x.queued, x.queue_limit, x.spawned, x.completed, x.lost, x.policy,
           x.policy_revision);
}

/// One worker of a pool and its cgroup's accounting at one instant (the
/// pool's answer to `usage_atom`; what a session's stats are made of).
struct worker_stats {
  uint64_t worker_id = 0;
  int32_t pid = 0; ///< in the supervisor's pid namespace
  worker_state state = worker_state::starting;
  uint32_t execs = 0;          ///< execs it ran to the end
  bool has_cgroup = false;     ///< false: no cgroup, the numbers below are zero
  uint64_t cpu_us = 0;         ///< CPU time of the whole cgroup since it started
  uint64_t memory_bytes = 0;   ///< memory charged to the cgroup now
  uint64_t memory_peak_bytes = 0; ///< peak since the last exec began (v2 before 6.12: ever)
  uint64_t pids = 0;           ///< tasks (processes and threads) in the cgroup now
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_stats& x) {
  return f(caf::meta::type_name("worker_stats"), x.worker_id, x.pid, x.state, x.execs,
           x.has_cgroup, x.cpu_us, x.memory_bytes, x.memory_peak_bytes, x.pids);
}

} // namespace castellan
