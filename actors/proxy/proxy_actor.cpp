/// @file proxy_actor.cpp
/// See proxy_actor.hpp.

#include "actors/proxy/proxy_actor.hpp"

#include <caf/all.hpp>

#include "actors/proxy/egress_proxy.hpp"
#include "actors/telemetry/metric_names.hpp"

namespace castellan {

namespace {

struct proxy_state {
  std::unique_ptr<proxy::egress_proxy> engine;
  static inline const char* name = "castellan.proxy";
};

/// Audit and telemetry for one record, from the I/O thread (anon_send is
/// thread-safe; the handles are copies owned by the sink). The proxy is not
/// an audit producer with credits (audit_credits.hpp): each record belongs
/// to a connection of an exec a pool admitted, and the open connections are
/// bounded by the egress limits; when the audit falls behind, the pools'
/// credits are what stops new execs.
proxy::record_sink make_sink(const proxy_config& cfg) {
  return [audit = cfg.audit, telemetry = cfg.telemetry](connection_record&& r) {
    if (telemetry) {
      caf::anon_send(telemetry, counter_increment{metric_names::egress_connections,
                                                  {{"pool", r.pool}, {"decision", r.decision}},
                                                  1});
      if (r.bytes_out != 0)
        caf::anon_send(telemetry,
                       counter_increment{metric_names::egress_bytes,
                                         {{"pool", r.pool}, {"direction", "out"}}, r.bytes_out});
      if (r.bytes_in != 0)
        caf::anon_send(telemetry,
                       counter_increment{metric_names::egress_bytes,
                                         {{"pool", r.pool}, {"direction", "in"}}, r.bytes_in});
    }
    if (audit)
      caf::anon_send(audit, std::move(r));
  };
}

using proxy_ptr = proxy_actor::stateful_pointer<proxy_state>;

proxy_actor::behavior_type proxy_impl(proxy_ptr self, proxy_config cfg) {
  // The state's destructor (when the actor ends) closes every connection
  // and joins the I/O thread.
  self->state.engine = std::make_unique<proxy::egress_proxy>(cfg.limits, make_sink(cfg));
  return {
    [=](egress_link& link) {
      if (!link.socket || !*link.socket || !link.policy)
        return; // from another node, or already closed: nothing to serve
      self->state.engine->attach(std::move(link.pool), link.worker_id,
                                 std::move(*link.socket), link.policy.policy,
                                 std::move(link.current_exec));
    },
    [=](egress_detach_atom, std::string& pool, uint64_t worker_id) {
      self->state.engine->detach(std::move(pool), worker_id);
    },
    [=](status_atom) -> egress_status {
      const auto s = self->state.engine->stats();
      return egress_status{s.workers, s.open_connections, s.accepted, s.refused,
                           s.denied,  s.bytes_out,        s.bytes_in};
    },
    [=](shutdown_atom) { self->quit(); },
  };
}

} // namespace

proxy_actor spawn_proxy(caf::actor_system& sys, proxy_config cfg) {
  return sys.spawn(proxy_impl, std::move(cfg));
}

} // namespace castellan
