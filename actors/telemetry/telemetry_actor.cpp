#include "actors/telemetry/telemetry_actor.hpp"

#include <chrono>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/telemetry/telemetry_core.hpp"

namespace castellan {

namespace {

struct telemetry_state {
  static inline const char* name = "castellan.telemetry";
  telemetry_core core;
};

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

telemetry_actor::behavior_type
telemetry_impl(telemetry_actor::stateful_pointer<telemetry_state> self, size_t max_series) {
  self->state.core = telemetry_core{max_series};
  return {
      [=](const exec_observation& x) { self->state.core.apply(x, now_ms()); },
      [=](const pool_status& x) { self->state.core.apply(x); },
      [=](const worker_usage& x) { self->state.core.apply(x); },
      [=](const worker_retired& x) { self->state.core.apply(x); },
      [=](const counter_increment& x) { self->state.core.apply(x); },
      [=](const mediated_syscall& x) { self->state.core.apply(x, now_ms()); },
      [=](const ring_fill& x) { self->state.core.apply(x); },
      [=](metrics_atom) -> std::string { return self->state.core.exposition(); },
      [=](summary_atom) -> std::string { return self->state.core.summary(now_ms()); },
      [=](summary_data_atom) -> telemetry_summary {
        return self->state.core.summarize(now_ms());
      },
  };
}

} // namespace

telemetry_actor spawn_telemetry(caf::actor_system& sys, size_t max_series_per_family) {
  return sys.spawn(telemetry_impl, max_series_per_family);
}

} // namespace castellan
