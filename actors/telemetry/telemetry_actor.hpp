#pragma once

/// @file telemetry_actor.hpp
/// The telemetry actor's typed interface and its spawn helper. Observations
/// are fire-and-forget so that the exec hot path never waits for metrics;
/// `metrics_atom` answers with the Prometheus text, `summary_atom` with a few
/// lines for humans, `summary_data_atom` with their figures as numbers.

#include <string>

#include <caf/actor_system.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"

namespace castellan {

using telemetry_actor =
    caf::typed_actor<caf::reacts_to<exec_observation>, caf::reacts_to<pool_status>,
                     caf::reacts_to<worker_usage>, caf::reacts_to<worker_retired>,
                     caf::reacts_to<counter_increment>, caf::reacts_to<mediated_syscall>,
                     caf::reacts_to<ring_fill>, caf::replies_to<metrics_atom>::with<std::string>,
                     caf::replies_to<summary_atom>::with<std::string>,
                     caf::replies_to<summary_data_atom>::with<telemetry_summary>>;

/// Spawns the telemetry actor; `max_series_per_family` bounds each metric's
/// label sets (per-worker series are the ones that grow).
telemetry_actor spawn_telemetry(caf::actor_system& sys, size_t max_series_per_family = 1000);

} // namespace castellan
