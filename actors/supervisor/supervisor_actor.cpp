#include "actors/supervisor/supervisor_actor.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <set>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

namespace castellan {

namespace {

struct pool_entry {
  pool_config cfg;
  pool_actor handle;
  uint32_t restarts = 0;
};

struct supervisor_state {
  static inline const char* name = "castellan.supervisor";

  std::vector<std::string> order; ///< pool names, the default first
  std::map<std::string, pool_entry> pools;
  std::vector<caf::actor> subscribers;
  telemetry_actor telemetry;
  audit_actor audit; ///< null when nothing is audited
  proxy_actor proxy; ///< null when no pool allows network
  uint64_t next_exec_id = 1;
  bool shutting_down = false;
};

using supervisor_ptr = supervisor_actor::stateful_pointer<supervisor_state>;

/// Spawns (or respawns) the pool `name` and monitors it.
bool start_pool(supervisor_ptr self, pool_entry& entry) {
  entry.cfg.listener = caf::actor_cast<worker_state_listener>(self);
  entry.cfg.telemetry = self->state.telemetry;
  entry.cfg.audit = self->state.audit;
  auto pool = spawn_pool(self->system(), entry.cfg);
  if (!pool) {
    spdlog::error("supervisor: {}", pool.error().describe());
    return false;
  }
  entry.handle = *pool;
  self->monitor(entry.handle);
  return true;
}

void on_down(supervisor_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  auto& subs = st.subscribers;
  subs.erase(std::remove_if(subs.begin(), subs.end(),
                            [&](const caf::actor& a) { return a.address() == msg.source; }),
             subs.end());
  if (st.shutting_down)
    return;
  for (auto& [name, entry] : st.pools) {
    if (entry.handle.address() != msg.source)
      continue;
    // A pool only quits on shutdown; anything else is a crash: restart it.
    ++entry.restarts;
    spdlog::error("supervisor: pool {} went down ({}); restart #{}", name,
                  caf::to_string(msg.reason), entry.restarts);
    if (!start_pool(self, entry))
      entry.handle = nullptr;
  }
}

/// The audit and telemetry actors a supervisor starts its pools with.
struct observers {
  telemetry_actor telemetry;
  audit_actor audit;
  std::shared_ptr<audit_pressure> pressure;
  proxy_actor proxy;
};

supervisor_actor::behavior_type supervisor_impl(supervisor_ptr self, supervisor_config cfg,
                                                observers obs) {
  auto& st = self->state;
  st.telemetry = obs.telemetry;
  st.audit = obs.audit;
  st.proxy = obs.proxy;
  for (auto& pc : cfg.pools) {
    pc.audit_backlog = obs.pressure;
    if (pc.egress_policy)
      pc.proxy = obs.proxy;
    st.order.push_back(pc.name);
    auto& entry = st.pools[pc.name];
    entry.cfg = std::move(pc);
    start_pool(self, entry);
  }
  self->set_down_handler([=](caf::down_msg& msg) { on_down(self, msg); });
  return {
    [=](exec_atom, exec_request& req) -> caf::result<exec_result> {
      auto& s = self->state;
      const std::string& name = req.pool.empty() ? s.order.front() : req.pool;
      auto it = s.pools.find(name);
      if (it == s.pools.end())
        return make_error(castellan_errc::no_such_pool, "exec: no pool named '" + name + "'");
      if (!it->second.handle)
        return make_error(castellan_errc::spawn_failed, "exec: pool '" + name + "' is down");
      if (req.exec_id == 0)
        req.exec_id = s.next_exec_id++;
      // The pool answers the requester directly.
      return self->delegate(it->second.handle, exec_atom::value, std::move(req));
    },
    [=](status_atom) -> caf::result<std::vector<pool_status>> {
      auto& s = self->state;
      auto rp = self->make_response_promise<std::vector<pool_status>>();
      auto acc = std::make_shared<std::vector<pool_status>>();
      auto remaining = std::make_shared<size_t>(s.order.size());
      for (const auto& name : s.order) {
        const auto& entry = s.pools[name];
        auto done = [rp, acc, remaining]() mutable {
          if (--*remaining == 0) {
            std::sort(acc->begin(), acc->end(),
                      [](const auto& a, const auto& b) { return a.name < b.name; });
            rp.deliver(*acc);
          }
        };
        if (!entry.handle) {
          pool_status down;
          down.name = name;
          acc->push_back(down);
          done();
          continue;
        }
        self->request(entry.handle, std::chrono::seconds(5), status_atom::value)
          .then([acc, done](pool_status& ps) mutable {
                  acc->push_back(std::move(ps));
                  done();
                },
                [acc, done, name](caf::error&) mutable {
                  pool_status down;
                  down.name = name;
                  acc->push_back(down);
                  done();
                });
      }
      return rp;
    },
    [=](get_pool_atom, const std::string& name) -> caf::result<pool_actor> {
      auto it = self->state.pools.find(name.empty() ? self->state.order.front() : name);
      if (it == self->state.pools.end() || !it->second.handle)
        return make_error(castellan_errc::no_such_pool, "get_pool: no pool named '" + name + "'");
      return it->second.handle;
    },
    [=](subscribe_atom, const caf::actor& who) {
      if (!who)
        return;
      self->monitor(who);
      self->state.subscribers.push_back(who);
    },
    [=](unsubscribe_atom, const caf::actor& who) {
      auto& subs = self->state.subscribers;
      subs.erase(std::remove(subs.begin(), subs.end(), who), subs.end());
    },
    [=](worker_state_event& ev) {
      for (const auto& sub : self->state.subscribers)
        caf::anon_send(sub, ev);
    },
    [=](metrics_atom) -> caf::result<std::string> {
      return self->delegate(self->state.telemetry, metrics_atom::value);
    },
    [=](summary_atom) -> caf::result<std::string> {
      return self->delegate(self->state.telemetry, summary_atom::value);
    },
    [=](audit_flush_atom) -> caf::result<audit_stats> {
      if (!self->state.audit)
        return audit_stats{};
      if (!self->state.proxy)
        return self->delegate(self->state.audit, audit_flush_atom::value);
      // The proxy's records travel from its I/O thread straight to audit: a
      // round trip through that thread first puts every record of a
      // connection that has ended ahead of the flush.
      auto rp = self->make_response_promise<audit_stats>();
      self->request(self->state.proxy, std::chrono::seconds(5), status_atom::value)
        .then([=](egress_status&) mutable { rp.delegate(self->state.audit, audit_flush_atom::value); },
              [=](caf::error&) mutable { rp.delegate(self->state.audit, audit_flush_atom::value); });
      return rp;
    },
    [=](shutdown_atom) {
      auto& s = self->state;
      s.shutting_down = true;
      for (auto& [name, entry] : s.pools)
        if (entry.handle)
          self->send(entry.handle, shutdown_atom::value);
      auto stop = [=] {
        if (self->state.proxy)
          self->send(self->state.proxy, shutdown_atom::value);
        if (self->state.audit)
          self->send_exit(self->state.audit, caf::exit_reason::user_shutdown);
        self->send_exit(self->state.telemetry, caf::exit_reason::user_shutdown);
        self->quit();
      };
      if (!s.audit) {
        stop();
        return;
      }
      // Every record the pools sent before their shutdown is written before
      // the audit actor goes away.
      self->request(s.audit, std::chrono::seconds(30), audit_flush_atom::value)
        .then([=](audit_stats&) { stop(); }, [=](caf::error&) { stop(); });
    },
  };
}

} // namespace

outcome<supervisor_actor> spawn_supervisor(caf::actor_system& sys, supervisor_config cfg) {
  if (cfg.pools.empty())
    return logic_failure("supervisor: no pools configured");
  std::set<std::string> names;
  for (auto& pc : cfg.pools) {
    if (pc.name.empty() || !names.insert(pc.name).second)
      return logic_failure("supervisor: pool name '" + pc.name + "' is empty or used twice");
    // Resolve and check each pool's files now, so that a misconfiguration is
    // an error for the caller rather than a log line from a background actor.
    auto resolved = resolve_pool_config(std::move(pc));
    if (!resolved)
      return resolved.error().wrap("supervisor");
    pc = std::move(*resolved);
  }
  observers obs;
  obs.telemetry = spawn_telemetry(sys);
  if (cfg.audit) {
    obs.pressure = std::make_shared<audit_pressure>();
    auto audit = spawn_audit(sys, *cfg.audit, audit_links{obs.telemetry, obs.pressure});
    if (!audit) {
      caf::anon_send_exit(obs.telemetry, caf::exit_reason::user_shutdown);
      return logic_failure("supervisor: audit: " + sys.render(audit.error()));
    }
    obs.audit = *audit;
  }
  if (std::any_of(cfg.pools.begin(), cfg.pools.end(),
                  [](const pool_config& pc) { return pc.egress_policy != nullptr; }))
    obs.proxy = spawn_proxy(sys, proxy_config{cfg.egress, obs.audit, obs.pressure, obs.telemetry});
  return sys.spawn(supervisor_impl, std::move(cfg), std::move(obs));
}

} // namespace castellan
