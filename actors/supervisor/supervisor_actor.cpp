#include "actors/supervisor/supervisor_actor.hpp"

#include <algorithm>
#include <map>
#include <memory>
#include <deque>
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
  uint64_t next_exec_id = 1;
  /// Execs routed and not yet answered: exec id → pool name, so that a
  /// cancel goes to the one pool that has the exec.
  std::map<uint64_t, std::string> in_flight;
  /// Recently answered exec ids (bounded), for "already finished" answers.
  std::set<uint64_t> finished;
  std::deque<uint64_t> finished_order;
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

/// How many answered exec ids the supervisor remembers for cancel answers.
constexpr std::size_t finished_ids_kept = 4096;

void forget_exec(supervisor_ptr self, uint64_t exec_id) {
  auto& st = self->state;
  st.in_flight.erase(exec_id);
  if (!st.finished.insert(exec_id).second)
    return;
  st.finished_order.push_back(exec_id);
  if (st.finished_order.size() > finished_ids_kept) {
    st.finished.erase(st.finished_order.front());
    st.finished_order.pop_front();
  }
}

/// The audit and telemetry actors a supervisor starts its pools with.
struct observers {
  telemetry_actor telemetry;
  audit_actor audit;
  std::shared_ptr<audit_pressure> pressure;
};

supervisor_actor::behavior_type supervisor_impl(supervisor_ptr self, supervisor_config cfg,
                                                observers obs) {
  auto& st = self->state;
  st.telemetry = obs.telemetry;
  st.audit = obs.audit;
  for (auto& pc : cfg.pools) {
    pc.audit_backlog = obs.pressure;
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
      if (req.exec_id == 0) {
        // Skip ids a client chose itself that are still running.
        while (s.in_flight.count(s.next_exec_id) != 0)
          ++s.next_exec_id;
        req.exec_id = s.next_exec_id++;
      } else if (s.in_flight.count(req.exec_id) != 0) {
        return make_error(castellan_errc::invalid_request,
                          "exec: exec_id " + std::to_string(req.exec_id) + " is already running");
      }
      const uint64_t exec_id = req.exec_id;
      s.in_flight.emplace(exec_id, name);
      // Not a delegate: the supervisor has to see the answer to know the
      // exec is no longer in flight (the cancel route).
      auto rp = self->make_response_promise<exec_result>();
      self->request(it->second.handle, caf::infinite, exec_atom::value, std::move(req))
        .then(
          [=](exec_result& r) mutable {
            forget_exec(self, exec_id);
            rp.deliver(std::move(r));
          },
          [=](caf::error& err) mutable {
            forget_exec(self, exec_id);
            rp.deliver(std::move(err));
          });
      return rp;
    },
    [=](cancel_atom, uint64_t exec_id) -> caf::result<cancel_reply> {
      auto& s = self->state;
      auto it = s.in_flight.find(exec_id);
      if (it == s.in_flight.end()) {
        cancel_reply reply;
        reply.exec_id = exec_id;
        const bool done = s.finished.count(exec_id) != 0;
        reply.outcome = done ? cancel_outcome::already_finished : cancel_outcome::unknown;
        reply.detail = "exec " + std::to_string(exec_id) +
                       (done ? " had already finished" : " is not known to the supervisor");
        return reply;
      }
      auto pool = s.pools.find(it->second);
      if (pool == s.pools.end() || !pool->second.handle) {
        cancel_reply reply;
        reply.exec_id = exec_id;
        reply.pool = it->second;
        reply.outcome = cancel_outcome::unknown;
        reply.detail = "pool '" + it->second + "' of exec " + std::to_string(exec_id) + " is down";
        return reply;
      }
      return self->delegate(pool->second.handle, cancel_atom::value, exec_id);
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
      return self->delegate(self->state.audit, audit_flush_atom::value);
    },
    [=](shutdown_atom) {
      auto& s = self->state;
      s.shutting_down = true;
      for (auto& [name, entry] : s.pools)
        if (entry.handle)
          self->send(entry.handle, shutdown_atom::value);
      auto stop = [=] {
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
  return sys.spawn(supervisor_impl, std::move(cfg), std::move(obs));
}

} // namespace castellan
