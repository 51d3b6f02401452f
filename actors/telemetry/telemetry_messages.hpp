#pragma once

/// @file telemetry_messages.hpp
/// Observations the telemetry actor turns into metrics. All are sent
/// fire-and-forget from the hot paths (pool, event source, proxy), so each is
/// small and carries only numbers and the labels that identify a series.
/// A pool's occupancy arrives as the exec path's own `pool_status`.

#include <cstdint>
#include <map>
#include <string>

#include <caf/meta/type_name.hpp>

#include "actors/exec_messages.hpp"
#include "actors/telemetry/metric_names.hpp"

namespace castellan {

/// One finished exec: counted by pool and error class, its run time and queue
/// wait go into histograms.
struct exec_observation {
  std::string pool;
  error_class error = error_class::ok;
  uint64_t queue_us = 0;
  uint64_t run_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, exec_observation& x) {
  return f(caf::meta::type_name("exec_observation"), x.pool, x.error, x.queue_us, x.run_us);
}

/// A worker's cgroup readings: current memory and cumulative CPU time.
struct worker_usage {
  std::string pool;
  uint64_t worker_id = 0;
  uint64_t memory_bytes = 0;
  uint64_t cpu_us = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, worker_usage& x) {
  return f(caf::meta::type_name("worker_usage"), x.pool, x.worker_id, x.memory_bytes, x.cpu_us);
}

/// A worker is gone: its per-worker series are removed, so that recycling
/// does not grow the exposition without bound.
struct worker_retired {
  std::string pool;
  uint64_t worker_id = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_retired& x) {
  return f(caf::meta::type_name("worker_retired"), x.pool, x.worker_id);
}

/// Adds `value` to the counter `name` (a Prometheus name ending in `_total`,
/// e.g. castellan_worker_spawns_total) with these labels.
struct counter_increment {
  std::string name;
  std::map<std::string, std::string> labels;
  uint64_t value = 1;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, counter_increment& x) {
  return f(caf::meta::type_name("counter_increment"), x.name, x.labels, x.value);
}

/// One syscall the supervisor decided through seccomp user notification:
/// `latency_ns` from the notification to the response.
struct mediated_syscall {
  std::string pool;
  std::string decision; ///< "allow", "deny", "warn", "kill"
  uint64_t latency_ns = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, mediated_syscall& x) {
  return f(caf::meta::type_name("mediated_syscall"), x.pool, x.decision, x.latency_ns);
}

/// How full a shared-memory ring was when the pool looked.
struct ring_fill {
  std::string pool;
  std::string ring; ///< "to_worker" or "from_worker"
  uint64_t used_bytes = 0;
  uint64_t capacity_bytes = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, ring_fill& x) {
  return f(caf::meta::type_name("ring_fill"), x.pool, x.ring, x.used_bytes, x.capacity_bytes);
}

/// Three quantiles of a latency histogram, in microseconds (bucket upper
/// bounds, as the human summary shows them).
struct latency_quantiles {
  uint64_t p50_us = 0;
  uint64_t p90_us = 0;
  uint64_t p99_us = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, latency_quantiles& x) {
  return f(caf::meta::type_name("latency_quantiles"), x.p50_us, x.p90_us, x.p99_us);
}

/// The figures of the human summary (`summary_atom`), as numbers: what the
/// daemon's `GET /v1/status` shows. Rates are over the last ten seconds;
/// the pools' own figures come from the pools (`status_atom`).
struct telemetry_summary {
  uint64_t execs = 0;                                ///< finished, every class
  std::map<std::string, uint64_t> execs_by_class;    ///< "ok", "timeout", …
  double execs_per_second = 0;
  latency_quantiles run;                             ///< exec run time
  latency_quantiles queue;                           ///< exec queue wait
  uint64_t workers_spawned = 0;
  uint64_t workers_killed = 0;
  uint64_t workers_recycled = 0;
  uint64_t syscalls_mediated = 0;
  double syscalls_per_second = 0;
  latency_quantiles syscall_latency;                 ///< notification to response
  uint64_t audit_records = 0;
  uint64_t audit_dropped = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, telemetry_summary& x) {
  return f(caf::meta::type_name("telemetry_summary"), x.execs, x.execs_by_class,
           x.execs_per_second, x.run, x.queue, x.workers_spawned, x.workers_killed,
           x.workers_recycled, x.syscalls_mediated, x.syscalls_per_second, x.syscall_latency,
           x.audit_records, x.audit_dropped);
}

} // namespace castellan
