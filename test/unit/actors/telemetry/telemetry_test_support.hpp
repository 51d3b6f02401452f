#pragma once

/// @file telemetry_test_support.hpp
/// A known set of observations, so that tests can compare the exposition's
/// figures with what they did.

#include <vector>

#include "actors/telemetry/telemetry_core.hpp"

namespace castellan::test {

/// What `feed` did.
struct fed {
  std::vector<uint64_t> run_us; ///< pool "p", error classes below
  std::vector<uint64_t> queue_us;
  uint64_t ok = 0, timeout = 0, busy = 0;
  std::vector<uint64_t> syscall_ns; ///< pool "p"
};

/// 100 execs on pool "p" (90 ok, 8 timeout, 2 busy), 3 spawns, 1 kill,
/// 2 recycles, 50 mediated syscalls (40 allow, 10 deny), a pool status, two
/// workers' usage and ring fills. Rates are observed at `now_ms`.
inline fed feed(telemetry_core& core, int64_t now_ms) {
  fed f;
  for (uint64_t i = 0; i < 100; ++i) {
    exec_observation x;
    x.pool = "p";
    x.error = i < 90 ? error_class::ok : i < 98 ? error_class::timeout : error_class::busy;
    x.queue_us = i * 3;
    x.run_us = 100 + i * i * 10;
    if (x.error == error_class::ok)
      ++f.ok;
    else if (x.error == error_class::timeout)
      ++f.timeout;
    else
      ++f.busy;
    if (x.error != error_class::busy) {
      f.run_us.push_back(x.run_us);
      f.queue_us.push_back(x.queue_us);
    }
    core.apply(x, now_ms);
  }
  pool_status ps;
  ps.name = "p";
  ps.size = 8;
  ps.idle = 5;
  ps.busy = 2;
  ps.starting = 1;
  ps.queued = 3;
  ps.queue_limit = 64;
  core.apply(ps);
  for (int i = 0; i < 3; ++i)
    core.apply(counter_increment{metric_names::worker_spawns, {{"pool", "p"}}, 1});
  core.apply(counter_increment{metric_names::worker_kills, {{"pool", "p"}}, 1});
  core.apply(counter_increment{metric_names::worker_recycles, {{"pool", "p"}}, 2});
  for (uint64_t i = 0; i < 50; ++i) {
    mediated_syscall m{"p", i < 40 ? "allow" : "deny", 1500 + i * 700};
    f.syscall_ns.push_back(m.latency_ns);
    core.apply(m, now_ms);
  }
  core.apply(worker_usage{"p", 1, 50 << 20, 1500000});
  core.apply(worker_usage{"p", 2, 30 << 20, 250});
  core.apply(ring_fill{"p", "to_worker", 1024, 4096});
  core.apply(ring_fill{"p", "to_worker", 512, 4096});
  core.apply(ring_fill{"p", "from_worker", 4096, 4096});
  return f;
}

} // namespace castellan::test
