#pragma once

/// @file metric_names.hpp
/// The names of castellan's metrics (docs/metrics.md), for the telemetry
/// actor and for senders of `counter_increment` (the pool's spawns, kills
/// and recycles).

namespace castellan::metric_names {

inline constexpr const char* execs = "castellan_execs_total";
inline constexpr const char* exec_duration = "castellan_exec_duration_seconds";
inline constexpr const char* exec_queue_wait = "castellan_exec_queue_wait_seconds";
inline constexpr const char* pool_size = "castellan_pool_size";
inline constexpr const char* pool_workers = "castellan_pool_workers";
inline constexpr const char* pool_queue_length = "castellan_pool_queue_length";
inline constexpr const char* pool_queue_limit = "castellan_pool_queue_limit";
inline constexpr const char* worker_spawns = "castellan_worker_spawns_total";
inline constexpr const char* worker_kills = "castellan_worker_kills_total";
inline constexpr const char* worker_recycles = "castellan_worker_recycles_total";
inline constexpr const char* worker_memory = "castellan_worker_memory_bytes";
inline constexpr const char* worker_cpu = "castellan_worker_cpu_seconds_total";
inline constexpr const char* mediated_syscalls = "castellan_mediated_syscalls_total";
inline constexpr const char* mediated_latency = "castellan_mediated_syscall_duration_seconds";
inline constexpr const char* ring_fill = "castellan_ring_fill_ratio";
inline constexpr const char* ring_fill_max = "castellan_ring_fill_ratio_max";
inline constexpr const char* audit_records = "castellan_audit_records_total";
inline constexpr const char* audit_dropped = "castellan_audit_dropped_total";
inline constexpr const char* refused = "castellan_telemetry_refused_total";
inline constexpr const char* egress_connections = "castellan_egress_connections_total";
inline constexpr const char* egress_bytes = "castellan_egress_bytes_total";
inline constexpr const char* request_policy_execs = "castellan_request_policy_execs_total";
inline constexpr const char* policy_pools_started = "castellan_policy_pools_started_total";
inline constexpr const char* policy_pools_stopped = "castellan_policy_pools_stopped_total";

} // namespace castellan::metric_names
