#include "actors/supervisor/supervisor_actor.hpp"

#include <algorithm>
#include <cerrno>
#include <functional>
#include <map>
#include <memory>
#include <deque>
#include <set>

#include <caf/all.hpp>
#include <caf/binary_serializer.hpp>
#include <spdlog/spdlog.h>

#include "actors/pool/policy_tightening.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/session/session_admission.hpp"
#include "actors/session/workspace_name.hpp"
#include "actors/telemetry/metric_names.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;

struct pool_entry {
  pool_config cfg;
  pool_actor handle;
  uint32_t restarts = 0;
  // -- pools of request policies ----------------------------------------------
  bool for_policy = false; ///< started for a request policy (not configured)
  std::string policy_hash;
  uint32_t in_flight = 0;  ///< execs routed to it and not answered (running or queued)
  uint64_t generation = 0; ///< bumped on every exec routed to it
  clock_type::time_point last_used;
  /// Which start of the pool this is: an answer from an earlier one (a
  /// policy pool that crashed and was started again) is not counted here.
  uint64_t instance = 0;
};

/// A configured pool a reconfigure removed or replaced: it admits nothing
/// new and is stopped once the execs routed to it are answered.
struct retiring_pool {
  std::string name;
  pool_actor handle;
  uint32_t in_flight = 0;
};

/// An exec routed and not yet answered.
struct routed_exec {
  std::string pool;
  uint64_t instance = 0; ///< pool_entry::instance it was routed to
  /// Its client's answer. Kept here, not only in the request's handlers:
  /// a pool that dies while it runs the exec never answers (CAF 0.17 drops
  /// an undelivered promise without a word), so the supervisor answers it.
  caf::typed_response_promise<exec_result> answer;
};

/// A session the supervisor created and has not seen go. It counts against
/// the limits from its create until its worker and cgroup are gone and its
/// workspace lease is released (then it is erased), whatever ends it.
struct session_entry {
  session_actor handle; ///< null while its workspace is being opened
  session_info info;
  /// The lease on its workspace (null without one), held for the session:
  /// released once its worker is gone.
  std::shared_ptr<workspace_lease> lease;
  /// Destroyed, reaped or failed: no longer reachable by its id, still
  /// counted until it is erased.
  bool ending = false;
  bool finishing = false; ///< its lease is being released; erased after
};

struct supervisor_state {
  static inline const char* name = "castellan.supervisor";

  std::vector<std::string> order; ///< pool names, the default first
  std::map<std::string, pool_entry> pools;
  std::vector<worker_state_listener> subscribers;
  telemetry_actor telemetry;
  audit_actor audit; ///< null when nothing is audited
  proxy_actor proxy; ///< null when no pool allows network
  policy_actor policies; ///< null without a policy directory
  proxy::egress_limits egress;
  uint64_t next_exec_id = 1;
  uint64_t next_instance = 1;
  // -- request policies ----------------------------------------------------------
  policy_pool_config policy_cfg;
  pool_config policy_template; ///< the default pool without its policy
  std::unique_ptr<request_policy_cache> policy_cache;
  std::map<std::string, std::string> policy_pools; ///< policy hash → pool name
  /// Execs routed and not yet answered: exec id → pool name, so that a
  /// cancel goes to the one pool that has the exec.
  std::map<uint64_t, routed_exec> in_flight;
  /// Recently answered exec ids (bounded), for "already finished" answers.
  std::set<uint64_t> finished;
  std::deque<uint64_t> finished_order;
  /// Pools a reconfigure took out of `pools`, by pool_entry::instance.
  std::map<uint64_t, retiring_pool> retiring;
  // -- sessions -------------------------------------------------------------------
  session_limits session_cfg;
  /// Every session that counts against the limits, by id.
  std::map<std::string, session_entry> sessions;
  // -- workspaces -----------------------------------------------------------------
  std::shared_ptr<workspace_store> store; ///< null: no workspaces
  workspace_config workspace_cfg;
  /// Work running off the supervisor's thread (off_loop): what to do in the
  /// supervisor once the thread that ran it is down.
  std::map<caf::actor_addr, std::function<void()>> off_loop;
  bool shutting_down = false;
};

using supervisor_ptr = supervisor_internal_actor::stateful_pointer<supervisor_state>;

/// Spawns (or respawns) the pool `name` and monitors it.
bool start_pool(supervisor_ptr self, pool_entry& entry) {
  auto& st = self->state;
  entry.cfg.telemetry = st.telemetry;
  entry.cfg.audit = st.audit;
  // A pool that follows a policy may be given network by a reload.
  if (entry.cfg.egress_policy || entry.cfg.policies) {
    // A request policy's pool may be the first to need the proxy.
    if (!st.proxy)
      st.proxy = spawn_proxy(self->system(),
                             proxy_config{st.egress, st.audit, st.telemetry});
    entry.cfg.proxy = st.proxy;
  }
  entry.instance = st.next_instance++;
  auto pool = spawn_pool(self->system(), entry.cfg);
  if (!pool) {
    spdlog::error("supervisor: {}", pool.error().describe());
    return false;
  }
  entry.handle = *pool;
  self->monitor(entry.handle);
  // State events cost the pool a message per transition: only asked for
  // while someone listens.
  if (!st.subscribers.empty())
    self->send(entry.handle, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  return true;
}

/// Asks every pool for its state events (the first subscriber came), or
/// stops them (the last one left).
void listen_to_pools(supervisor_ptr self, bool on) {
  const auto me = caf::actor_cast<worker_state_listener>(self);
  for (const auto& [name, entry] : self->state.pools) {
    if (!entry.handle)
      continue;
    if (on)
      self->send(entry.handle, subscribe_atom::value, me);
    else
      self->send(entry.handle, unsubscribe_atom::value, me);
  }
}

void answer_lost(supervisor_ptr self, uint64_t instance, const std::string& pool,
                 const caf::error& reason);

void finish_session(supervisor_ptr self, const std::string& id, std::function<void()> then);

void on_down(supervisor_ptr self, const caf::down_msg& msg) {
  auto& st = self->state;
  if (auto it = st.off_loop.find(msg.source); it != st.off_loop.end()) {
    auto then = std::move(it->second);
    st.off_loop.erase(it);
    then();
    return;
  }
  for (auto it = st.sessions.begin(); it != st.sessions.end(); ++it)
    if (it->second.handle && it->second.handle.address() == msg.source) {
      // Destroyed, reaped, or failed to start: its worker is gone (a session
      // quits once its pool is down). It counts until its lease is released.
      it->second.ending = true;
      if (!it->second.finishing)
        finish_session(self, it->first, {});
      return;
    }
  auto& subs = st.subscribers;
  const bool had = !subs.empty();
  subs.erase(std::remove_if(subs.begin(), subs.end(),
                            [&](const worker_state_listener& a) { return a.address() == msg.source; }),
             subs.end());
  if (had && subs.empty() && !st.shutting_down)
    listen_to_pools(self, false);
  if (st.shutting_down)
    return;
  for (auto it = st.retiring.begin(); it != st.retiring.end(); ++it)
    if (it->second.handle.address() == msg.source) {
      spdlog::error("supervisor: retiring pool {} went down ({})", it->second.name,
                    caf::to_string(msg.reason));
      const uint64_t instance = it->first;
      const std::string name = it->second.name;
      st.retiring.erase(it);
      answer_lost(self, instance, name, msg.reason);
      return;
    }
  for (auto it = st.pools.begin(); it != st.pools.end(); ++it) {
    auto& [name, entry] = *it;
    if (entry.handle.address() != msg.source)
      continue;
    const uint64_t instance = entry.instance;
    if (entry.for_policy) {
      // Started on demand: the next request of its policy starts another.
      spdlog::error("supervisor: policy pool {} went down ({})", name,
                    caf::to_string(msg.reason));
      const std::string gone = name;
      st.policy_pools.erase(entry.policy_hash);
      st.pools.erase(it);
      answer_lost(self, instance, gone, msg.reason);
      return;
    }
    // A pool only quits on shutdown; anything else is a crash: restart it.
    // Its execs in flight are answered with the error of their request, and
    // their answers no longer reach this entry (another instance): the new
    // pool starts with none.
    ++entry.restarts;
    entry.in_flight = 0;
    spdlog::error("supervisor: pool {} went down ({}); restart #{}", name,
                  caf::to_string(msg.reason), entry.restarts);
    const std::string crashed = name;
    if (!start_pool(self, entry))
      entry.handle = nullptr;
    answer_lost(self, instance, crashed, msg.reason);
    return;
  }
}

caf::error no_session(const std::string& id) {
  return make_error(castellan_errc::no_such_session, "no session '" + id + "'");
}

/// The session `ref` names when its caller owns it and it has not begun to
/// end; null otherwise (one answer for "none" and "someone else's").
session_entry* find_session(supervisor_ptr self, const session_ref& ref) {
  auto it = self->state.sessions.find(ref.id);
  if (it == self->state.sessions.end() || it->second.ending || !it->second.handle ||
      it->second.info.owner != ref.owner)
    return nullptr;
  return &it->second;
}

/// Runs `work` on a thread of its own (a detached actor) and `then` in the
/// supervisor once that thread is done: the store's blocking calls (mke2fs,
/// fallocate, mount, unmount, unlink) never hold up the supervisor's
/// messages. `work` must touch nothing of the supervisor's state.
void off_loop(supervisor_ptr self, std::function<void()> work, std::function<void()> then) {
  auto thread = self->spawn<caf::detached + caf::monitored>(
    [work = std::move(work)](caf::blocking_actor*) { work(); });
  self->state.off_loop.emplace(thread.address(), std::move(then));
}

caf::error workspaces_disabled() {
  return make_error(castellan_errc::workspaces_disabled,
                    "workspaces: this supervisor has no workspace store");
}

/// A failure of the store as the error a client gets (workspace_store.hpp
/// classifies its failures by errno).
caf::error workspace_error(const failure& f) {
  switch (f.code) {
    case EINVAL:
      return make_error(castellan_errc::invalid_request, f.message);
    case ENOENT:
      return make_error(castellan_errc::no_such_workspace, f.message);
    case EEXIST:
      return make_error(castellan_errc::workspace_exists, f.message);
    case EBUSY:
      return make_error(castellan_errc::workspace_in_use, f.message);
    case EDQUOT:
      return make_error(castellan_errc::busy, f.message);
    case ENOSPC:
      return make_error(castellan_errc::no_space, f.message);
    default:
      return make_error(castellan_errc::io_failed, f.describe());
  }
}

/// The workspace `name` as the store lists it now.
outcome<workspace_info> workspace_info_of(workspace_store& store, const std::string& name) {
  auto all = store.list();
  if (!all)
    return all.error();
  for (auto& w : *all)
    if (w.name == name)
      return std::move(w);
  return failure{ENOENT, "no workspace '" + name + "'"};
}

/// The session `id` is gone from the client's view: its lease is released
/// (off the supervisor's thread: the last lease unmounts), then it is
/// erased and stops counting, then `then` runs.
void finish_session(supervisor_ptr self, const std::string& id, std::function<void()> then) {
  auto& s = self->state;
  auto it = s.sessions.find(id);
  if (it == s.sessions.end() || it->second.finishing) {
    if (then)
      then();
    return;
  }
  it->second.ending = true;
  it->second.finishing = true;
  auto lease = std::move(it->second.lease);
  if (!lease) {
    s.sessions.erase(it);
    if (then)
      then();
    return;
  }
  off_loop(
    self, [lease]() mutable { lease->release(); },
    [=] {
      self->state.sessions.erase(id);
      if (then)
        then();
    });
}

void audit_refused_session(supervisor_ptr self, const session_options& opts,
                           const std::string& pool, const std::string& reason) {
  if (!self->state.audit)
    return;
  session_record rec;
  rec.owner = opts.owner;
  rec.pool = pool;
  rec.event = "refused";
  rec.reason = reason;
  self->send(self->state.audit, std::move(rec));
}

/// The second half of a create: the session's slot is taken (and its
/// workspace leased); spawns it and answers `rp` once its worker is ready.
void start_session(supervisor_ptr self, const std::string& id, session_options opts,
                   caf::typed_response_promise<session_info> rp) {
  auto& s = self->state;
  auto entry = s.sessions.find(id);
  if (entry == s.sessions.end() || entry->second.ending) {
    rp.deliver(make_error(castellan_errc::shutting_down, "session: the supervisor is stopping"));
    return;
  }
  const session_info info = entry->second.info;
  auto pool = s.pools.find(info.pool);
  if (pool == s.pools.end() || pool->second.for_policy) {
    // Reconfigured away while the workspace was opened.
    finish_session(self, id, [=]() mutable {
      rp.deliver(make_error(castellan_errc::no_such_pool,
                            "session: no configured pool named '" + info.pool + "'"));
    });
    return;
  }
  session_config sc;
  sc.info = info;
  sc.worker = session_worker_config(pool->second.cfg, info, entry->second.lease.get());
  sc.audit = s.audit;
  auto handle = spawn_session(self->system(), std::move(sc));
  if (!handle) {
    audit_refused_session(self, opts, info.pool, handle.error().describe());
    auto err = make_error(castellan_errc::spawn_failed, handle.error());
    finish_session(self, id, [=]() mutable { rp.deliver(err); });
    return;
  }
  entry->second.handle = *handle;
  self->monitor(*handle);
  self->request(*handle, std::chrono::milliseconds(s.session_cfg.create_timeout_ms),
                ready_atom::value)
    .then([=](session_info& ready) mutable { rp.deliver(std::move(ready)); },
          [=](caf::error& err) mutable {
            // Not created after all: it goes, and counts until its worker
            // is gone (its down message finishes it).
            auto& s2 = self->state;
            if (auto it = s2.sessions.find(id); it != s2.sessions.end() && !it->second.ending) {
              it->second.ending = true;
              caf::anon_send(it->second.handle, destroy_atom::value);
            }
            rp.deliver(std::move(err));
          });
}

/// Checks the limits, takes the session's slot, opens its workspace (off
/// the supervisor's thread), spawns the session from its pool's
/// configuration and answers once its worker is ready (or why it is not).
caf::result<session_info> create_session(supervisor_ptr self, session_options opts) {
  auto& s = self->state;
  if (s.shutting_down)
    return make_error(castellan_errc::shutting_down, "session: the supervisor is stopping");
  const std::string name = opts.pool.empty() ? s.order.front() : opts.pool;
  auto pool = s.pools.find(name);
  if (pool == s.pools.end() || pool->second.for_policy)
    return make_error(castellan_errc::no_such_pool,
                      "session: no configured pool named '" + name + "'");
  std::size_t of_owner = 0;
  for (const auto& [id, session] : s.sessions)
    of_owner += session.info.owner == opts.owner ? 1u : 0u;
  session_info info;
  session_refusal why;
  if (!admit_session(s.session_cfg, opts, s.sessions.size(), of_owner, info, why)) {
    audit_refused_session(self, opts, name, why.reason);
    return make_error(why.busy ? castellan_errc::busy : castellan_errc::invalid_request,
                      "session: " + why.reason);
  }
  if (!info.workspace.empty() && !s.store) {
    audit_refused_session(self, opts, name, "no workspace store");
    return workspaces_disabled();
  }
  do
    info.id = new_session_id();
  while (s.sessions.count(info.id) != 0);
  info.pool = name;
  info.created_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  const std::string id = info.id;
  session_entry slot;
  slot.info = info;
  s.sessions.emplace(id, std::move(slot));
  auto rp = self->make_response_promise<session_info>();
  if (info.workspace.empty()) {
    start_session(self, id, std::move(opts), rp);
    return rp;
  }
  auto store = s.store;
  auto leased = std::make_shared<std::optional<outcome<workspace_lease>>>();
  off_loop(
    self, [store, leased, ws = info.workspace] { leased->emplace(store->open_workspace(ws)); },
    [=]() mutable {
      auto& s2 = self->state;
      auto it = s2.sessions.find(id);
      if (!leased->has_value() || !**leased) {
        const auto err = leased->has_value() ? workspace_error((**leased).error().wrap("session"))
                                             : make_error(castellan_errc::io_failed,
                                                          "session: the workspace was not opened");
        audit_refused_session(self, opts, name, describe(err, self->system()));
        if (it != s2.sessions.end())
          s2.sessions.erase(it);
        rp.deliver(err);
        return;
      }
      if (it == s2.sessions.end()) {
        rp.deliver(make_error(castellan_errc::shutting_down, "session: the supervisor is stopping"));
        return; // the lease goes with `leased`
      }
      it->second.lease = std::make_shared<workspace_lease>(std::move(***leased));
      start_session(self, id, std::move(opts), rp);
    });
  return rp;
}

/// A workspace request in the store, off the supervisor's thread: `work`
/// runs there and its outcome answers `rp`.
template <class T>
void store_call(supervisor_ptr self, caf::typed_response_promise<T> rp,
                std::function<outcome<T>(workspace_store&)> work) {
  auto store = self->state.store;
  auto out = std::make_shared<std::optional<outcome<T>>>();
  off_loop(
    self, [store, out, work] { out->emplace(work(*store)); },
    [rp, out]() mutable {
      if (!out->has_value())
        rp.deliver(make_error(castellan_errc::io_failed, "workspaces: the store did not answer"));
      else if (!**out)
        rp.deliver(workspace_error((**out).error()));
      else
        rp.deliver(std::move(***out));
    });
}

/// How many answered exec ids the supervisor remembers for cancel answers.
constexpr std::size_t finished_ids_kept = 4096;

void count(supervisor_ptr self, const char* metric, std::map<std::string, std::string> labels) {
  if (self->state.telemetry)
    self->send(self->state.telemetry, counter_increment{metric, std::move(labels), 1});
}

/// Stops the policy pool `name` (idle: nothing routed to it is unanswered).
void stop_policy_pool(supervisor_ptr self, const std::string& name, const char* reason) {
  auto& st = self->state;
  auto it = st.pools.find(name);
  if (it == st.pools.end() || !it->second.for_policy)
    return;
  spdlog::debug("supervisor: stopping policy pool {} ({})", name, reason);
  if (it->second.handle) {
    self->demonitor(it->second.handle.address());
    self->send(it->second.handle, shutdown_atom::value);
  }
  st.policy_pools.erase(it->second.policy_hash);
  st.pools.erase(it);
  count(self, metric_names::policy_pools_stopped, {{"reason", reason}});
}

/// Execs routed to `name` (its start `instance`): one more (when `delta`
/// is 1) or one fewer; a policy pool left with none is checked again after
/// the idle timeout.
void track(supervisor_ptr self, const std::string& name, uint64_t instance, int delta) {
  auto& st = self->state;
  auto it = st.pools.find(name);
  if (it == st.pools.end() || it->second.instance != instance) {
    // Only answers reach a retiring pool's count: it admits nothing new.
    auto old = st.retiring.find(instance);
    if (old == st.retiring.end() || delta > 0)
      return;
    if (old->second.in_flight > 0)
      --old->second.in_flight;
    if (old->second.in_flight == 0) {
      spdlog::info("supervisor: retired pool {} drained; stopping it", old->second.name);
      self->demonitor(old->second.handle.address());
      self->send(old->second.handle, shutdown_atom::value);
      st.retiring.erase(old);
    }
    return;
  }
  auto& e = it->second;
  if (delta > 0) {
    ++e.in_flight;
    ++e.generation;
    e.last_used = clock_type::now();
    return;
  }
  if (e.in_flight > 0)
    --e.in_flight;
  e.last_used = clock_type::now();
  if (e.for_policy && e.in_flight == 0)
    self->delayed_send(self, std::chrono::milliseconds(st.policy_cfg.idle_timeout_ms),
                       pool_idle_atom::value, name, e.generation);
}

void forget_exec(supervisor_ptr self, uint64_t exec_id) {
  auto& st = self->state;
  if (auto it = st.in_flight.find(exec_id); it != st.in_flight.end())
    track(self, it->second.pool, it->second.instance, -1);
  st.in_flight.erase(exec_id);
  if (!st.finished.insert(exec_id).second)
    return;
  st.finished_order.push_back(exec_id);
  if (st.finished_order.size() > finished_ids_kept) {
    st.finished.erase(st.finished_order.front());
    st.finished_order.pop_front();
  }
}

/// Answers exec `exec_id`, routed to pool instance `instance`, with `x` (an
/// exec_result or an error), once: an exec the supervisor already answered
/// (its pool died) is not answered again.
template <class T>
void answer_exec(supervisor_ptr self, uint64_t exec_id, uint64_t instance, T&& x) {
  auto& st = self->state;
  auto it = st.in_flight.find(exec_id);
  if (it == st.in_flight.end() || it->second.instance != instance)
    return;
  auto rp = it->second.answer;
  forget_exec(self, exec_id);
  rp.deliver(std::forward<T>(x));
}

/// Pool instance `instance` (named `pool`) went down with execs in flight:
/// each is answered `worker_lost` now. Whatever the code did is lost with
/// the pool's workers, and the exec is not run again.
void answer_lost(supervisor_ptr self, uint64_t instance, const std::string& pool,
                 const caf::error& reason) {
  std::vector<uint64_t> lost;
  for (const auto& [exec_id, routed] : self->state.in_flight)
    if (routed.instance == instance)
      lost.push_back(exec_id);
  for (const uint64_t exec_id : lost) {
    exec_result r;
    r.exec_id = exec_id;
    r.error = error_class::worker_lost;
    r.exit_code = 1;
    r.detail = "pool '" + pool + "' went down (" + caf::to_string(reason) +
               ") while the exec was in flight; it was not run again";
    answer_exec(self, exec_id, instance, std::move(r));
  }
}

/// The audit and telemetry actors a supervisor starts its pools with.
struct observers {
  telemetry_actor telemetry;
  audit_actor audit;
  proxy_actor proxy;
  policy_actor policies;
  std::shared_ptr<workspace_store> store;
};

/// Where a request with a request policy goes.
struct policy_destination {
  std::string pool; ///< empty: none (see `busy`)
  std::string busy; ///< why it cannot run now (answered `busy`)
};

/// The pool of policy `rp`, started when there is none. At the cap the
/// least recently used idle policy pool makes room; with none idle the
/// answer is busy.
caf::expected<policy_destination> policy_pool_for(supervisor_ptr self, const request_policy& rp) {
  auto& st = self->state;
  if (auto it = st.policy_pools.find(rp.hash); it != st.policy_pools.end())
    return policy_destination{it->second, {}};
  const uint32_t cap = st.policy_cfg.max_pools;
  if (cap == 0)
    return policy_destination{{}, "request policy " + rp.name +
                                    " needs a pool of its own and the supervisor starts none "
                                    "(policy_pools.max_pools is 0)"};
  if (st.policy_pools.size() >= cap) {
    const pool_entry* lru = nullptr;
    std::string lru_name;
    for (const auto& [name, entry] : st.pools)
      if (entry.for_policy && entry.in_flight == 0 && (!lru || entry.last_used < lru->last_used)) {
        lru = &entry;
        lru_name = name;
      }
    if (!lru)
      return policy_destination{{}, "all " + std::to_string(cap) +
                                      " policy pools (policy_pools.max_pools) are running or queueing "
                                      "execs; none is idle to make room for request policy " +
                                      rp.name};
    stop_policy_pool(self, lru_name, "lru");
  }
  // The name carries the hash's first 12 hex digits; another hash with the
  // same prefix (never seen in practice) gets a longer one.
  std::string name = rp.name;
  for (std::size_t n = 13; st.pools.count(name) != 0 && n <= rp.hash.size(); ++n)
    name = "policy-" + rp.hash.substr(0, n);
  auto& entry = st.pools[name];
  entry.cfg = rp.pool;
  entry.cfg.name = name;
  entry.for_policy = true;
  entry.policy_hash = rp.hash;
  entry.last_used = clock_type::now();
  if (!start_pool(self, entry)) {
    st.pools.erase(name);
    return make_error(castellan_errc::spawn_failed,
                      "exec: the pool of request policy " + rp.name + " could not be started");
  }
  st.policy_pools[rp.hash] = name;
  spdlog::debug("supervisor: started pool {} for a request policy", name);
  count(self, metric_names::policy_pools_started, {});
  return policy_destination{name, {}};
}

/// A newer revision of a policy pools follow: a pool restarted from now on
/// starts under it (the running pools take it themselves), and when the
/// default pool follows it, request policies are bounded by it. A revision
/// the pool's config cannot take is left to the pool to refuse and audit.
void follow_revision(supervisor_ptr self, const policy_updated& u) {
  auto& st = self->state;
  if (!u.snapshot)
    return;
  for (auto& [name, entry] : st.pools) {
    const auto& current = entry.cfg.policy;
    if (entry.for_policy || !current || current->name() != u.policy_name ||
        current->revision() >= u.revision)
      continue;
    auto applied = resolved_under(entry.cfg, u.snapshot.policy);
    if (!applied)
      continue;
    entry.cfg.policy = u.snapshot.policy;
    if (name != st.order.front())
      continue;
    st.policy_template = policy_pool_template(*applied, st.policy_cfg);
    // Request policies resolved against the old ceiling are checked again.
    st.policy_cache = std::make_unique<request_policy_cache>(st.policy_cfg.cache_size);
  }
}

/// Validates the request's policy and decides where it runs: on `target`
/// as it is (same enforcement), on `target` narrowed (a fork-mode pool whose
/// policy it tightens), or in a pool of its own. Sets the request's
/// tightening, policy name and (unless given) timeout accordingly.
caf::expected<policy_destination> route_request_policy(supervisor_ptr self, exec_request& req,
                                                       const std::string& target) {
  auto& st = self->state;
  auto resolved = st.policy_cache->resolve(req.policy, st.policy_template, st.policy_cfg);
  if (!resolved)
    return make_error(castellan_errc::policy_invalid,
                      "exec: invalid request policy:\n" + resolved.error().describe());
  auto& rp = **resolved;
  req.policy_name = rp.name;
  const auto& pool = st.pools[target];
  // A pool that follows its policy file may be under another revision than
  // the one it started with, which its entry here does not know: comparing a
  // request policy with it could find "the same" where the pool grants more.
  // Such a request runs in a pool of its own.
  const bool follows = pool.cfg.policy != nullptr;
  if (!pool.for_policy && !follows && req.argv.empty()) {
    auto known = rp.routes.find(target);
    if (known == rp.routes.end()) {
      policy_route r;
      if (auto same = same_enforcement(pool.cfg, rp.pool); same) {
        r.how = policy_route::kind::same;
      } else if (auto fit = narrows(pool.cfg, rp.pool); !fit) {
        r.why = "not the same as pool " + target + "'s (" + same.why_not +
                ") nor narrower (" + fit.why_not + ")";
      } else if (auto payload = make_tightening(pool.cfg, rp.pool, rp.name); !payload) {
        r.why = payload.error().describe();
        spdlog::error("supervisor: {}", r.why);
      } else {
        r.how = policy_route::kind::narrowed;
        r.tightening = std::move(*payload);
      }
      known = rp.routes.emplace(target, std::move(r)).first;
    }
    const auto& route = known->second;
    if (route.how != policy_route::kind::own_pool) {
      // The request policy's timeout is this exec's deadline.
      if (req.timeout_ms == 0)
        req.timeout_ms = rp.pool.default_timeout_ms;
      const bool narrowed = route.how == policy_route::kind::narrowed;
      if (narrowed)
        req.tightening = route.tightening;
      count(self, metric_names::request_policy_execs, {{"route", narrowed ? "narrowed" : "same"}});
      return policy_destination{target, {}};
    }
    spdlog::debug("supervisor: {} runs in its own pool: {}", rp.name, route.why);
  }
  auto dest = policy_pool_for(self, rp);
  if (dest && !dest->pool.empty())
    count(self, metric_names::request_policy_execs, {{"route", "policy_pool"}});
  return dest;
}

/// The spec's bytes (pool_spec's inspect: every setting, the policy as its
/// text), to tell whether two configs describe the same pool.
std::vector<char> spec_bytes(caf::actor_system& sys, pool_spec spec) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  if (auto err = sink(spec))
    buf.clear();
  return buf;
}

/// Takes a configured pool out of the routing: stopped now when nothing
/// routed to it is unanswered, else once the last answer comes
/// (track()).
void retire_pool(supervisor_ptr self, const std::string& name) {
  auto& st = self->state;
  auto it = st.pools.find(name);
  if (it == st.pools.end())
    return;
  auto& e = it->second;
  if (e.handle) {
    if (e.in_flight == 0) {
      self->demonitor(e.handle.address());
      self->send(e.handle, shutdown_atom::value);
    } else {
      spdlog::info("supervisor: pool {} retires after {} exec(s) in flight", name, e.in_flight);
      st.retiring[e.instance] = retiring_pool{name, e.handle, e.in_flight};
    }
  }
  st.pools.erase(it);
}

/// The reconfigure message: checks and starts every new pool first, then
/// swaps them in and retires what they replace (supervisor_actor.hpp).
outcome<pools_change> reconfigure(supervisor_ptr self, std::vector<pool_config> pools) {
  auto& st = self->state;
  if (st.shutting_down)
    return logic_failure("reconfigure: the supervisor is shutting down");
  if (pools.empty())
    return logic_failure("reconfigure: no pools configured");
  std::set<std::string> names;
  for (const auto& pc : pools) {
    if (pc.name.empty() || !names.insert(pc.name).second)
      return logic_failure("reconfigure: pool name '" + pc.name + "' is empty or used twice");
    auto known = st.pools.find(pc.name);
    if (known != st.pools.end() && known->second.for_policy)
      return logic_failure("reconfigure: pool name '" + pc.name +
                           "' is the name of a running request policy's pool");
  }
  enum class what { keep, add, resize, replace };
  std::vector<what> plan;
  std::vector<pool_entry> fresh(pools.size());
  for (std::size_t i = 0; i < pools.size(); ++i) {
    auto& pc = pools[i];
    auto known = st.pools.find(pc.name);
    // A pool that follows a policy of the directory runs the revision the
    // supervisor resolved: the new config only names it.
    if (known != st.pools.end() && !pc.named_policy.empty() &&
        pc.named_policy == known->second.cfg.named_policy)
      pc.policy = known->second.cfg.policy;
    // Compared as the running pool was: with its files found and checked.
    auto resolved = resolve_pool_config(pc);
    if (!resolved)
      return resolved.error().wrap("reconfigure");
    what w = what::add;
    if (known != st.pools.end()) {
      const auto was = spec_bytes(self->system(), known->second.cfg.spec());
      pool_spec now = resolved->spec();
      if (spec_bytes(self->system(), now) == was) {
        w = what::keep;
      } else {
        now.size = known->second.cfg.size;
        w = spec_bytes(self->system(), now) == was ? what::resize : what::replace;
      }
    }
    plan.push_back(w);
    if (w == what::keep)
      continue;
    if (!pc.named_policy.empty() && (!pc.policy || !st.policies))
      return logic_failure("reconfigure: pool " + pc.name + " names policy '" +
                           pc.named_policy + "', and no policy directory is running");
    if (!pc.named_policy.empty())
      resolved->policies = st.policies;
    if (auto applied = resolved_under(*resolved, resolved->policy); !applied)
      return applied.error().wrap("reconfigure");
    fresh[i].cfg = std::move(*resolved);
  }
  // Start every new pool before touching the running ones.
  std::vector<std::size_t> started;
  auto undo = [&] {
    for (auto i : started) {
      self->demonitor(fresh[i].handle.address());
      self->send(fresh[i].handle, shutdown_atom::value);
    }
  };
  for (std::size_t i = 0; i < pools.size(); ++i) {
    if (plan[i] == what::keep)
      continue;
    if (!start_pool(self, fresh[i])) {
      undo();
      return logic_failure("reconfigure: pool " + fresh[i].cfg.name +
                           " could not be started; nothing changed");
    }
    started.push_back(i);
  }
  pools_change change;
  std::vector<std::string> order;
  for (std::size_t i = 0; i < plan.size(); ++i) {
    const std::string name = plan[i] == what::keep ? pools[i].name : fresh[i].cfg.name;
    order.push_back(name);
    switch (plan[i]) {
      case what::keep: continue;
      case what::add: change.added.push_back(name); break;
      case what::resize: change.resized.push_back(name); break;
      case what::replace: change.replaced.push_back(name); break;
    }
    retire_pool(self, name);
    st.pools[name] = std::move(fresh[i]);
  }
  for (const auto& name : st.order)
    if (names.count(name) == 0) {
      change.removed.push_back(name);
      retire_pool(self, name);
    }
  change.default_changed = order.front() != st.order.front();
  const bool default_new = change.default_changed || plan.front() != what::keep;
  st.order = std::move(order);
  if (default_new) {
    // Request policies are bounded by the default pool: the new one.
    const auto& def = st.pools[st.order.front()].cfg;
    auto applied = pool_config_under(def, def.policy);
    st.policy_template = policy_pool_template(applied ? *applied : def, st.policy_cfg);
  }
  // Routes of request policies were decided against the pools replaced.
  if (default_new || !change.resized.empty() || !change.replaced.empty() ||
      !change.removed.empty())
    st.policy_cache = std::make_unique<request_policy_cache>(st.policy_cfg.cache_size);
  spdlog::info("supervisor: pools reconfigured: {}", describe(change));
  return change;
}

supervisor_internal_actor::behavior_type supervisor_impl(supervisor_ptr self, supervisor_config cfg,
                                                observers obs) {
  auto& st = self->state;
  st.telemetry = obs.telemetry;
  st.audit = obs.audit;
  st.proxy = obs.proxy;
  st.policies = obs.policies;
  st.egress = cfg.egress;
  st.policy_cfg = cfg.policy_pools;
  // Request policies are bounded by the default pool as its policy made it
  // (follow_revision moves the bound with each revision the default pool
  // follows). spawn_supervisor checked that the policy applies.
  {
    auto applied = pool_config_under(cfg.pools.front(), cfg.pools.front().policy);
    st.policy_template =
      policy_pool_template(applied ? *applied : cfg.pools.front(), st.policy_cfg);
  }
  st.policy_cache = std::make_unique<request_policy_cache>(st.policy_cfg.cache_size);
  st.session_cfg = cfg.sessions;
  st.store = obs.store;
  if (cfg.workspaces)
    st.workspace_cfg = *cfg.workspaces;
  for (auto& pc : cfg.pools) {
    st.order.push_back(pc.name);
    auto& entry = st.pools[pc.name];
    entry.cfg = std::move(pc);
    start_pool(self, entry);
  }
  self->set_down_handler([=](caf::down_msg& msg) { on_down(self, msg); });
  if (st.policies)
    self->send(st.policies, subscribe_atom::value, caf::actor_cast<caf::actor>(self));
  return {
    [=](exec_atom, exec_request& req) -> caf::result<exec_result> {
      auto& s = self->state;
      // Only the supervisor narrows a request or names its policy.
      req.tightening.clear();
      req.policy_name.clear();
      std::string name = req.pool.empty() ? s.order.front() : req.pool;
      auto it = s.pools.find(name);
      if (it == s.pools.end())
        return make_error(castellan_errc::no_such_pool, "exec: no pool named '" + name + "'");
      std::string busy;
      if (!req.policy.empty()) {
        auto dest = route_request_policy(self, req, name);
        if (!dest)
          return std::move(dest.error());
        busy = std::move(dest->busy);
        name = std::move(dest->pool);
        it = s.pools.find(name);
      }
      if (busy.empty() && (it == s.pools.end() || !it->second.handle))
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
      if (!busy.empty()) {
        exec_result r;
        r.exec_id = exec_id;
        r.error = error_class::busy;
        r.exit_code = 1;
        r.detail = std::move(busy);
        return r;
      }
      // Not a delegate: the supervisor has to see the answer to know the
      // exec is no longer in flight (the cancel route).
      auto rp = self->make_response_promise<exec_result>();
      const uint64_t instance = it->second.instance;
      s.in_flight.emplace(exec_id, routed_exec{name, instance, rp});
      track(self, name, instance, +1);
      self->request(it->second.handle, caf::infinite, exec_atom::value, std::move(req))
        .then([=](exec_result& r) { answer_exec(self, exec_id, instance, std::move(r)); },
              [=](caf::error& err) { answer_exec(self, exec_id, instance, std::move(err)); });
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
      if (auto old = s.retiring.find(it->second.instance); old != s.retiring.end())
        return self->delegate(old->second.handle, cancel_atom::value, exec_id);
      auto pool = s.pools.find(it->second.pool);
      if (pool == s.pools.end() || !pool->second.handle) {
        cancel_reply reply;
        reply.exec_id = exec_id;
        reply.pool = it->second.pool;
        reply.outcome = cancel_outcome::unknown;
        reply.detail =
          "pool '" + it->second.pool + "' of exec " + std::to_string(exec_id) + " is down";
        return reply;
      }
      return self->delegate(pool->second.handle, cancel_atom::value, exec_id);
    },
    [=](status_atom) -> caf::result<std::vector<pool_status>> {
      auto& s = self->state;
      auto rp = self->make_response_promise<std::vector<pool_status>>();
      auto acc = std::make_shared<std::vector<pool_status>>();
      auto remaining = std::make_shared<size_t>(s.pools.size());
      for (const auto& kv : s.pools) {
        const std::string& name = kv.first;
        const pool_entry& entry = kv.second;
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
    [=](subscribe_atom, const worker_state_listener& who) {
      if (!who)
        return;
      self->monitor(who);
      auto& subs = self->state.subscribers;
      subs.push_back(who);
      if (subs.size() == 1)
        listen_to_pools(self, true);
    },
    [=](unsubscribe_atom, const worker_state_listener& who) {
      auto& subs = self->state.subscribers;
      const bool had = !subs.empty();
      subs.erase(std::remove(subs.begin(), subs.end(), who), subs.end());
      if (had && subs.empty())
        listen_to_pools(self, false);
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
    [=](summary_data_atom) -> caf::result<telemetry_summary> {
      return self->delegate(self->state.telemetry, summary_data_atom::value);
    },
    [=](get_audit_atom) -> audit_actor { return self->state.audit; },
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
      // A session's pool is stopped as the session goes.
      for (auto& [id, session] : s.sessions)
        if (session.handle)
          self->send_exit(session.handle, caf::exit_reason::user_shutdown);
      s.sessions.clear();
      for (auto& [name, entry] : s.pools)
        if (entry.handle)
          self->send(entry.handle, shutdown_atom::value);
      for (auto& [instance, old] : s.retiring)
        self->send(old.handle, shutdown_atom::value);
      s.retiring.clear();
      auto stop = [=] {
        if (self->state.proxy)
          self->send(self->state.proxy, shutdown_atom::value);
        if (self->state.policies)
          self->send_exit(self->state.policies, caf::exit_reason::user_shutdown);
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
    [=](const policy_updated& u) {
      spdlog::info("supervisor: policy {} revision {} loaded from {}", u.policy_name, u.revision,
                   u.path);
      follow_revision(self, u);
    },
    [=](const policy_rejected& r) {
      spdlog::error("supervisor: policy {} refused ({}): {}", r.policy_name, r.path,
                    r.errors.empty() ? std::string("no reason given") : r.errors.front());
      if (self->state.audit)
        self->send(self->state.audit, make_policy_rejection(r)); // rare: not credited
    },
    [=](reconfigure_atom, std::vector<pool_config>& pools) -> caf::result<pools_change> {
      auto& s = self->state;
      // A pool that names a policy of the directory runs its current
      // snapshot: asked for first (a kept pool keeps the one it runs).
      std::vector<std::size_t> need;
      for (std::size_t i = 0; i < pools.size(); ++i) {
        if (pools[i].named_policy.empty())
          continue;
        auto known = s.pools.find(pools[i].name);
        if (known == s.pools.end() || known->second.cfg.named_policy != pools[i].named_policy)
          need.push_back(i);
      }
      if (need.empty() || !s.policies) {
        auto change = reconfigure(self, std::move(pools));
        if (!change)
          return make_error(castellan_errc::invalid_request, change.error().describe());
        return std::move(*change);
      }
      auto rp = self->make_response_promise<pools_change>();
      auto list = std::make_shared<std::vector<pool_config>>(std::move(pools));
      auto remaining = std::make_shared<std::size_t>(need.size());
      auto failed = std::make_shared<std::string>();
      auto finish = [=]() mutable {
        if (--*remaining != 0)
          return;
        if (!failed->empty()) {
          rp.deliver(make_error(castellan_errc::invalid_request, "reconfigure: " + *failed));
          return;
        }
        auto change = reconfigure(self, std::move(*list));
        if (!change)
          rp.deliver(make_error(castellan_errc::invalid_request, change.error().describe()));
        else
          rp.deliver(std::move(*change));
      };
      for (auto i : need)
        self->request(s.policies, std::chrono::seconds(30), policy_get_atom::value,
                      (*list)[i].named_policy)
          .then(
            [=](policy_snapshot& snap) mutable {
              (*list)[i].policy = std::move(snap.policy);
              finish();
            },
            [=](caf::error& err) mutable {
              if (failed->empty())
                *failed = "pool " + (*list)[i].name + ": policy '" + (*list)[i].named_policy +
                          "': " + self->system().render(err);
              finish();
            });
      return rp;
    },
    [=](session_create_atom, session_options& opts) -> caf::result<session_info> {
      return create_session(self, std::move(opts));
    },
    [=](session_get_atom, const session_ref& ref) -> caf::result<session_actor> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      return entry->handle;
    },
    [=](session_list_atom) -> std::vector<session_info> {
      std::vector<session_info> out;
      for (const auto& [id, session] : self->state.sessions)
        out.push_back(session.info);
      return out;
    },
    [=](session_list_atom, const std::string& owner) -> std::vector<session_info> {
      std::vector<session_info> out;
      for (const auto& [id, session] : self->state.sessions)
        if (session.info.owner == owner)
          out.push_back(session.info);
      return out;
    },
    [=](files_atom, const session_ref& ref, files_request& req) -> caf::result<files_reply> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      return self->delegate(entry->handle, files_atom::value, std::move(req));
    },
    [=](files_download_atom, const session_ref& ref,
        std::string& path) -> caf::result<download_ticket> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      return self->delegate(entry->handle, files_download_atom::value, std::move(path));
    },
    [=](exec_atom, const session_ref& ref, exec_request& req) -> caf::result<exec_result> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      return self->delegate(entry->handle, exec_atom::value, std::move(req));
    },
    [=](status_atom, const session_ref& ref) -> caf::result<session_stats> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      return self->delegate(entry->handle, status_atom::value);
    },
    [=](destroy_atom, const session_ref& ref) -> caf::result<session_stats> {
      auto* entry = find_session(self, ref);
      if (entry == nullptr)
        return no_session(ref.id);
      // Unreachable by its id from now on; it counts until its worker and
      // cgroup are gone (the session answers once they are) and its lease
      // is released: a create after this answer fits, one before it does not.
      entry->ending = true;
      const std::string id = ref.id;
      auto rp = self->make_response_promise<session_stats>();
      self->request(entry->handle, caf::infinite, destroy_atom::value)
        .then(
          [=](session_stats& last) mutable {
            finish_session(self, id, [=]() mutable { rp.deliver(std::move(last)); });
          },
          [=](caf::error& err) mutable {
            finish_session(self, id, [=]() mutable { rp.deliver(std::move(err)); });
          });
      return rp;
    },
    [=](workspace_create_atom, std::string& name,
        uint64_t quota) -> caf::result<workspace_info> {
      auto& s = self->state;
      if (!s.store)
        return workspaces_disabled();
      if (quota == 0)
        quota = s.workspace_cfg.default_quota_bytes;
      if (quota > s.workspace_cfg.max_quota_bytes)
        return make_error(castellan_errc::invalid_request,
                          "workspace '" + name + "': a quota of " + std::to_string(quota) +
                            " bytes is above the maximum of " +
                            std::to_string(s.workspace_cfg.max_quota_bytes));
      auto rp = self->make_response_promise<workspace_info>();
      store_call<workspace_info>(self, rp, [name, quota](workspace_store& store)
                                             -> outcome<workspace_info> {
        if (auto ok = store.create(name, quota); !ok)
          return ok.error();
        return workspace_info_of(store, name);
      });
      return rp;
    },
    [=](workspace_list_atom) -> caf::result<std::vector<workspace_info>> {
      if (!self->state.store)
        return workspaces_disabled();
      auto rp = self->make_response_promise<std::vector<workspace_info>>();
      store_call<std::vector<workspace_info>>(
        self, rp, [](workspace_store& store) { return store.list(); });
      return rp;
    },
    [=](workspace_remove_atom, std::string& name) -> caf::result<workspace_info> {
      if (!self->state.store)
        return workspaces_disabled();
      auto rp = self->make_response_promise<workspace_info>();
      store_call<workspace_info>(self, rp, [name](workspace_store& store)
                                             -> outcome<workspace_info> {
        if (auto ok = validate_workspace_name(name); !ok)
          return failure{EINVAL, ok.error().message};
        auto last = workspace_info_of(store, name);
        if (!last)
          return last.error();
        if (auto ok = store.remove(name); !ok)
          return ok.error();
        return last;
      });
      return rp;
    },
    [=](pool_idle_atom, const std::string& name, uint64_t generation) {
      auto& s = self->state;
      auto it = s.pools.find(name);
      // Used since (another generation), busy, or gone already: not idle.
      if (s.shutting_down || it == s.pools.end() || !it->second.for_policy ||
          it->second.in_flight != 0 || it->second.generation != generation)
        return;
      stop_policy_pool(self, name, "idle");
    },
  };
}

/// Spawns the policy actor of `cfg.policies` (none without it) and gives each
/// pool that names a policy its current snapshot and the actor to follow.
outcome<policy_actor> resolve_named_policies(caf::actor_system& sys, supervisor_config& cfg) {
  if (!cfg.policies) {
    for (const auto& pc : cfg.pools)
      if (!pc.named_policy.empty())
        return logic_failure("supervisor: pool " + pc.name + " names policy '" +
                             pc.named_policy + "', and no policy directory is configured");
    return policy_actor{};
  }
  auto policies = spawn_policy(sys, *cfg.policies);
  if (!policies)
    return logic_failure("supervisor: policies: " + sys.render(policies.error()));
  caf::scoped_actor ask{sys};
  for (auto& pc : cfg.pools) {
    if (pc.named_policy.empty())
      continue;
    std::string why;
    ask->request(*policies, std::chrono::seconds(30), policy_get_atom::value, pc.named_policy)
      .receive([&](policy_snapshot& snap) { pc.policy = std::move(snap.policy); },
               [&](caf::error& err) { why = sys.render(err); });
    if (!why.empty() || !pc.policy) {
      caf::anon_send_exit(*policies, caf::exit_reason::user_shutdown);
      return logic_failure("supervisor: pool " + pc.name + ": policy '" + pc.named_policy +
                           "': " + (why.empty() ? "no snapshot" : why));
    }
    pc.policies = *policies;
  }
  return *policies;
}

} // namespace

std::string describe(const pools_change& x) {
  std::string out;
  auto part = [&](const char* verb, const std::vector<std::string>& names) {
    if (names.empty())
      return;
    if (!out.empty())
      out += "; ";
    out += verb;
    for (std::size_t i = 0; i < names.size(); ++i)
      out += (i == 0 ? " " : ", ") + names[i];
  };
  part("added", x.added);
  part("removed", x.removed);
  part("resized", x.resized);
  part("replaced", x.replaced);
  if (out.empty())
    out = "no pool changed";
  if (x.default_changed)
    out += "; the default pool is now another";
  return out;
}

outcome<supervisor_actor> spawn_supervisor(caf::actor_system& sys, supervisor_config cfg) {
  if (cfg.pools.empty())
    return logic_failure("supervisor: no pools configured");
  observers obs;
  if (auto named = resolve_named_policies(sys, cfg); named)
    obs.policies = std::move(*named);
  else
    return named.error();
  // Until the supervisor runs, a failure below stops the policy actor here.
  auto stop_policies = [&] {
    if (obs.policies)
      caf::anon_send_exit(obs.policies, caf::exit_reason::user_shutdown);
  };
  std::set<std::string> names;
  for (auto& pc : cfg.pools) {
    if (pc.name.empty() || !names.insert(pc.name).second) {
      stop_policies();
      return logic_failure("supervisor: pool name '" + pc.name + "' is empty or used twice");
    }
    // Resolve and check each pool's files now, so that a misconfiguration is
    // an error for the caller rather than a log line from a background actor.
    auto resolved = resolve_pool_config(std::move(pc));
    auto applied = resolved ? resolved_under(*resolved, resolved->policy) : resolved;
    if (!applied) {
      stop_policies();
      return applied.error().wrap("supervisor");
    }
    pc = std::move(*resolved);
  }
  for (const auto& root : cfg.policy_pools.bindable_paths)
    if (root.empty() || root.front() != '/' || (root.size() > 1 && root.back() == '/') ||
        root.find("/./") != std::string::npos || root.find("/../") != std::string::npos ||
        root.find("//") != std::string::npos || root.find_first_of("*?[") != std::string::npos)
      return stop_policies(),
             logic_failure("supervisor: policy_pools.bindable_paths: '" + root +
                           "' is not a normalised absolute path without globs");
  if (cfg.policy_pools.idle_timeout_ms == 0) {
    stop_policies();
    return logic_failure("supervisor: policy_pools.idle_timeout_ms must be at least 1");
  }
  if (cfg.workspaces) {
    auto& ws = *cfg.workspaces;
    if (ws.default_quota_bytes == 0 || ws.default_quota_bytes > ws.max_quota_bytes)
      return stop_policies(),
             logic_failure("supervisor: workspaces: the default quota (" +
                           std::to_string(ws.default_quota_bytes) +
                           " bytes) must be at least 1 and at most the maximum quota (" +
                           std::to_string(ws.max_quota_bytes) + " bytes)");
    if (ws.store.owner.uid == 0 && ws.store.owner.gid == 0) {
      auto owner = sandbox_owner();
      if (!owner)
        return stop_policies(), owner.error().wrap("supervisor: workspaces");
      ws.store.owner = *owner;
    }
    auto store = workspace_store::open(ws.store);
    if (!store)
      return stop_policies(), store.error().wrap("supervisor: workspaces");
    obs.store = std::move(*store);
  }
  obs.telemetry = spawn_telemetry(sys);
  if (cfg.audit) {
    auto audit = spawn_audit(sys, *cfg.audit, audit_links{obs.telemetry});
    if (!audit) {
      caf::anon_send_exit(obs.telemetry, caf::exit_reason::user_shutdown);
      stop_policies();
      return logic_failure("supervisor: audit: " + sys.render(audit.error()));
    }
    obs.audit = *audit;
  }
  if (std::any_of(cfg.pools.begin(), cfg.pools.end(),
                  [](const pool_config& pc) { return pc.egress_policy != nullptr; }))
    obs.proxy = spawn_proxy(sys, proxy_config{cfg.egress, obs.audit, obs.telemetry});
  // Clients get the public interface only.
  return supervisor_actor{sys.spawn(supervisor_impl, std::move(cfg), std::move(obs))};
}

} // namespace castellan
