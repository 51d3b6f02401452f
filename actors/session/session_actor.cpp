#include "actors/session/session_actor.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <vector>

#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/errors.hpp"
#include "actors/session/session_files.hpp"
#include "actors/session/session_internal.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;

int64_t realtime_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
           std::chrono::system_clock::now().time_since_epoch())
    .count();
}

uint64_t ms_between(clock_type::time_point from, clock_type::time_point to) {
  if (to <= from)
    return 0;
  return static_cast<uint64_t>(
    std::chrono::duration_cast<std::chrono::milliseconds>(to - from).count());
}

/// The error classes whose exec the pool answered by killing the worker:
/// the session's state went with it.
bool kills_worker(error_class e) {
  switch (e) {
    case error_class::timeout:
    case error_class::cancelled:
    case error_class::oom:
    case error_class::policy_kill:
    case error_class::worker_lost:
      return true;
    default:
      return false;
  }
}

struct session_data {
  static inline const char* name = "castellan.session";

  session_info info;
  pool_config worker_cfg;
  audit_actor audit;
  pool_actor pool; ///< null once it is down
  session_state state = session_state::starting;
  std::string end_reason;
  uint64_t worker_id = 0; ///< its worker once ready (0: none yet)
  int32_t worker_pid = 0;
  uint64_t execs = 0;
  uint64_t next_exec_id = 1;
  clock_type::time_point ready_at; ///< when its worker became ready: the TTLs count from there
  clock_type::time_point last_used;
  /// Execs sent to the pool and not answered yet, by exec id. Kept here so
  /// that a session that goes away answers them (CAF 0.17 drops an
  /// undelivered promise without a word).
  std::map<uint64_t, caf::typed_response_promise<exec_result>> in_flight;
  std::vector<caf::typed_response_promise<session_info>> waiting_ready;
  std::vector<caf::typed_response_promise<session_stats>> waiting_destroy;
  bool destroying = false;
  /// The workspace's root for files operations (null: no workspace, or it
  /// could not be opened: files_unavailable says why).
  std::shared_ptr<const files_root> files;
  std::string files_unavailable;
  /// Files operations running (session_files.hpp), by their address: each
  /// is monitored, and stopped when the session goes.
  std::map<caf::actor_addr, files_job_actor> files_jobs;
};

using session_ptr = session_internal_actor::stateful_pointer<session_data>;

void audit(session_ptr self, const char* event, const std::string& reason) {
  auto& st = self->state;
  if (!st.audit)
    return;
  session_record rec;
  rec.session_id = st.info.id;
  rec.owner = st.info.owner;
  rec.pool = st.info.pool;
  rec.event = event;
  rec.reason = reason;
  rec.worker_pid = st.worker_pid;
  rec.execs = st.execs;
  rec.timestamp_ns = realtime_ns();
  self->send(st.audit, std::move(rec));
}

session_stats stats_now(session_ptr self) {
  auto& st = self->state;
  session_stats s;
  s.info = st.info;
  s.state = st.state;
  s.end_reason = st.end_reason;
  s.execs = st.execs;
  const auto now = clock_type::now();
  s.idle_ms = st.in_flight.empty() ? ms_between(st.last_used, now) : 0;
  s.age_ms = ms_between(st.ready_at, now);
  s.worker.worker_id = st.worker_id;
  s.worker.pid = st.state == session_state::ended ? 0 : st.worker_pid;
  return s;
}

caf::error ended_error(session_ptr self) {
  const auto& st = self->state;
  return make_error(castellan_errc::session_ended,
                    "session " + st.info.id + " ended: " + st.end_reason +
                      "; its state is gone, create a new session");
}

/// Answers every exec still in flight (the pool will not any more).
void answer_in_flight(session_ptr self, const std::string& why) {
  auto& st = self->state;
  for (auto& [exec_id, rp] : st.in_flight) {
    exec_result r;
    r.exec_id = exec_id;
    r.error = error_class::worker_lost;
    r.exit_code = 1;
    r.detail = "session " + st.info.id + " " + why;
    rp.deliver(std::move(r));
  }
  st.in_flight.clear();
}

/// The worker is gone: the session answers `session_ended` from now on,
/// until it is destroyed or reaped. Its pool is stopped (no fresh worker
/// takes its place: fresh state under the same id would surprise a client
/// that relies on what it defined).
void end(session_ptr self, std::string reason) {
  auto& st = self->state;
  if (st.state == session_state::ended || st.destroying)
    return;
  st.state = session_state::ended;
  st.end_reason = std::move(reason);
  spdlog::info("session {}: ended: {}", st.info.id, st.end_reason);
  audit(self, st.worker_id == 0 ? "create_failed" : "ended", st.end_reason);
  for (auto& rp : st.waiting_ready)
    rp.deliver(st.worker_id == 0
                 ? make_error(castellan_errc::spawn_failed,
                              "session " + st.info.id + ": its worker did not start: " +
                                st.end_reason)
                 : ended_error(self));
  st.waiting_ready.clear();
  if (st.pool)
    self->send(st.pool, shutdown_atom::value);
}

/// The last step of destroy and of the reaper: answers what waits, quits.
void finish(session_ptr self) {
  auto& st = self->state;
  answer_in_flight(self, "was destroyed");
  auto final_stats = stats_now(self);
  final_stats.worker.pid = 0;
  for (auto& rp : st.waiting_destroy)
    rp.deliver(final_stats);
  st.waiting_destroy.clear();
  for (auto& rp : st.waiting_ready)
    rp.deliver(make_error(castellan_errc::no_such_session,
                          "session " + st.info.id + " was destroyed"));
  st.waiting_ready.clear();
  for (auto& [addr, job] : st.files_jobs)
    self->send_exit(job, caf::exit_reason::user_shutdown);
  st.files_jobs.clear();
  self->quit();
}

/// A files job for a request, or the reason there is none.
caf::expected<files_job_actor> files_job(session_ptr self) {
  auto& st = self->state;
  if (st.destroying)
    return make_error(castellan_errc::no_such_session,
                      "session " + st.info.id + " is being destroyed");
  if (!st.files)
    return make_error(castellan_errc::invalid_request,
                      "session " + st.info.id + ": " + st.files_unavailable);
  if (st.files_jobs.size() >= max_files_jobs)
    return make_error(castellan_errc::busy,
                      "session " + st.info.id + ": " + std::to_string(max_files_jobs) +
                        " files operations are running; retry when one is done");
  auto job = spawn_files_job(self->system(), st.files);
  self->monitor(job);
  st.files_jobs.emplace(job.address(), job);
  // A client that uses the files is using the session.
  st.last_used = clock_type::now();
  return job;
}

/// Stops the pool and finishes once it is down (the worker killed and
/// reaped, its cgroup removed: the pool's workers go with its state).
void stop(session_ptr self, const char* event, const std::string& reason) {
  auto& st = self->state;
  if (st.destroying)
    return;
  st.destroying = true;
  if (st.end_reason.empty())
    st.end_reason = reason;
  audit(self, event, reason);
  if (!st.pool) {
    finish(self);
    return;
  }
  self->send(st.pool, shutdown_atom::value);
}

void arm_tick(session_ptr self) {
  auto& st = self->state;
  const auto now = clock_type::now();
  const auto lifetime_end = st.ready_at + std::chrono::milliseconds(st.info.max_lifetime_ms);
  auto next = lifetime_end;
  if (st.in_flight.empty())
    next = std::min(next, st.last_used + std::chrono::milliseconds(st.info.idle_ttl_ms));
  else
    next = std::min(next, now + std::chrono::milliseconds(st.info.idle_ttl_ms));
  const auto wait = std::max<int64_t>(
    1, std::chrono::duration_cast<std::chrono::milliseconds>(next - now).count() + 1);
  self->delayed_send(caf::actor_cast<session_internal_actor>(self),
                     std::chrono::milliseconds(wait), session_tick_atom::value);
}

void on_tick(session_ptr self) {
  auto& st = self->state;
  if (st.destroying)
    return;
  const auto now = clock_type::now();
  const uint64_t age = ms_between(st.ready_at, now);
  if (age >= st.info.max_lifetime_ms) {
    stop(self, "reaped",
         "maximum lifetime of " + std::to_string(st.info.max_lifetime_ms) + " ms reached");
    return;
  }
  const uint64_t idle = ms_between(st.last_used, now);
  if (st.in_flight.empty() && idle >= st.info.idle_ttl_ms) {
    stop(self, "reaped",
         "idle for " + std::to_string(idle) + " ms (idle TTL " +
           std::to_string(st.info.idle_ttl_ms) + " ms)");
    return;
  }
  arm_tick(self);
}

void on_result(session_ptr self, uint64_t exec_id, exec_result& r) {
  auto& st = self->state;
  auto it = st.in_flight.find(exec_id);
  if (it == st.in_flight.end())
    return; // answered already (destroyed meanwhile)
  auto rp = it->second;
  st.in_flight.erase(it);
  ++st.execs;
  st.last_used = clock_type::now();
  if (kills_worker(r.error) && st.state != session_state::ended && !st.destroying) {
    end(self, "its worker was killed by exec " + std::to_string(exec_id) + " (" +
                to_string(r.error) + (r.detail.empty() ? "" : ": " + r.detail) + ")");
    r.detail += std::string(r.detail.empty() ? "" : "; ") + "session " + st.info.id +
                " ended with its worker";
  } else if (st.state == session_state::running && st.in_flight.empty()) {
    st.state = session_state::ready;
  }
  rp.deliver(std::move(r));
}

session_internal_actor::behavior_type session_impl(session_ptr self, session_config cfg) {
  auto& st = self->state;
  st.info = std::move(cfg.info);
  st.audit = std::move(cfg.audit);
  st.ready_at = st.last_used = clock_type::now();
  cfg.worker.listener = caf::actor_cast<worker_state_listener>(self);
  // The lease's fd of the workspace's mount: what the files operations
  // resolve every path beneath (the sandbox binds the same).
  auto workspace_root = cfg.worker.sandbox.workspace_root;
  auto pool = spawn_pool(self->system(), std::move(cfg.worker));
  if (!pool) {
    // spawn_session checked the configuration; this is the start itself.
    // The creator's ready_atom gets the reason; destroy frees the actor.
    st.state = session_state::ended;
    st.end_reason = pool.error().describe();
    audit(self, "create_failed", st.end_reason);
  } else {
    st.pool = *pool;
    self->monitor(st.pool);
    // Whatever way the session goes, its pool (and worker) goes with it.
    self->attach_functor([p = st.pool] { caf::anon_send(p, shutdown_atom::value); });
  }
  if (st.info.workspace.empty()) {
    st.files_unavailable = "it has no workspace";
  } else if (auto root = open_files_root(workspace_root, st.info.workspace)) {
    st.files = std::move(*root);
  } else {
    st.files_unavailable = "its workspace cannot be reached: " + root.error().describe();
  }
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    if (s.files_jobs.erase(dm.source) != 0)
      return;
    if (!s.pool || dm.source != s.pool.address())
      return;
    s.pool = nullptr;
    if (s.destroying) {
      finish(self);
      return;
    }
    answer_in_flight(self, "lost its pool");
    // A pool that could not start says why in its exit reason (a sandbox
    // it cannot build for this session, say): the client gets that.
    end(self, dm.reason ? "its pool stopped: " + describe(dm.reason, self->system())
                        : std::string("its pool stopped"));
  });
  return {
    [=](exec_atom, exec_request& req) -> caf::result<exec_result> {
      auto& s = self->state;
      if (s.destroying)
        return make_error(castellan_errc::no_such_session,
                          "session " + s.info.id + " is being destroyed");
      if (s.state == session_state::ended)
        return ended_error(self);
      if (!req.policy.empty())
        return make_error(castellan_errc::invalid_request,
                          "session " + s.info.id +
                            ": a session runs under the policy of its pool; a request "
                            "policy is refused");
      req.pool.clear();
      req.tightening.clear();
      req.policy_name.clear();
      if (req.exec_id == 0) {
        while (s.in_flight.count(s.next_exec_id) != 0)
          ++s.next_exec_id;
        req.exec_id = s.next_exec_id++;
      } else if (s.in_flight.count(req.exec_id) != 0) {
        return make_error(castellan_errc::invalid_request,
                          "exec: exec_id " + std::to_string(req.exec_id) + " is already running");
      }
      const uint64_t exec_id = req.exec_id;
      auto rp = self->make_response_promise<exec_result>();
      s.in_flight.emplace(exec_id, rp);
      if (s.state == session_state::ready)
        s.state = session_state::running;
      self->request(s.pool, caf::infinite, exec_atom::value, std::move(req))
        .then([=](exec_result& r) { on_result(self, exec_id, r); },
              [=](caf::error& err) {
                auto& s2 = self->state;
                auto it = s2.in_flight.find(exec_id);
                if (it == s2.in_flight.end())
                  return;
                auto p = it->second;
                s2.in_flight.erase(it);
                p.deliver(std::move(err));
              });
      return rp;
    },
    [=](cancel_atom, uint64_t exec_id) -> caf::result<cancel_reply> {
      auto& s = self->state;
      if (!s.pool || s.in_flight.count(exec_id) == 0) {
        cancel_reply reply;
        reply.exec_id = exec_id;
        reply.outcome = cancel_outcome::unknown;
        return reply;
      }
      return self->delegate(s.pool, cancel_atom::value, exec_id);
    },
    [=](status_atom) -> caf::result<session_stats> {
      auto& s = self->state;
      if (!s.pool || s.state == session_state::ended || s.worker_id == 0)
        return stats_now(self);
      auto rp = self->make_response_promise<session_stats>();
      self->request(s.pool, std::chrono::seconds(5), usage_atom::value)
        .then(
          [=](std::vector<worker_stats>& workers) mutable {
            auto out = stats_now(self);
            for (auto& w : workers)
              if (w.worker_id == self->state.worker_id && out.state != session_state::ended)
                out.worker = w;
            rp.deliver(std::move(out));
          },
          [=](caf::error&) mutable { rp.deliver(stats_now(self)); });
      return rp;
    },
    [=](ready_atom) -> caf::result<session_info> {
      auto& s = self->state;
      if (s.destroying)
        return make_error(castellan_errc::no_such_session,
                          "session " + s.info.id + " is being destroyed");
      if (s.state == session_state::ended && s.worker_id == 0)
        return make_error(castellan_errc::spawn_failed,
                          "session " + s.info.id + ": its worker did not start: " + s.end_reason);
      if (s.state == session_state::ended)
        return ended_error(self);
      if (s.state != session_state::starting)
        return s.info;
      auto rp = self->make_response_promise<session_info>();
      s.waiting_ready.push_back(rp);
      return rp;
    },
    [=](destroy_atom) -> caf::result<session_stats> {
      auto& s = self->state;
      auto rp = self->make_response_promise<session_stats>();
      s.waiting_destroy.push_back(rp);
      stop(self, "destroyed", "destroyed by its client");
      return rp;
    },
    [=](const worker_state_event& ev) {
      auto& s = self->state;
      if (s.destroying || s.state == session_state::ended)
        return;
      if (ev.state == worker_state::ready && s.worker_id == 0) {
        s.worker_id = ev.worker_id;
        s.worker_pid = ev.pid;
        s.state = s.in_flight.empty() ? session_state::ready : session_state::running;
        s.ready_at = s.last_used = clock_type::now();
        arm_tick(self);
        audit(self, "created", "its worker is ready");
        for (auto& rp : s.waiting_ready)
          rp.deliver(s.info);
        s.waiting_ready.clear();
        return;
      }
      if (ev.state != worker_state::stopped)
        return;
      if (s.worker_id == 0) {
        end(self, ev.reason.empty() ? std::string("stopped while starting") : ev.reason);
        return;
      }
      if (ev.worker_id == s.worker_id) {
        answer_in_flight(self, "lost its worker: " + ev.reason);
        end(self, "its worker stopped: " + ev.reason);
      }
    },
    [=](session_tick_atom) { on_tick(self); },
    [=](files_atom, files_request& req) -> caf::result<files_reply> {
      auto job = files_job(self);
      if (!job)
        return std::move(job.error());
      return self->delegate(*job, files_atom::value, std::move(req));
    },
    [=](files_download_atom, std::string& path) -> caf::result<download_ticket> {
      auto job = files_job(self);
      if (!job)
        return std::move(job.error());
      return self->delegate(*job, files_download_atom::value, std::move(path));
    },
  };
}

} // namespace

pool_config session_worker_config(const pool_config& base, const session_info& info,
                                  const workspace_lease* workspace) {
  pool_config cfg = base;
  cfg.name = info.id;
  cfg.size = 1;
  cfg.mode = exec_mode::session;
  cfg.recycle_after = 0;
  // A launcher would be one more process per session, started before the
  // worker it clones: no faster than the worker's own cold start.
  cfg.warm_start = false;
  cfg.sandbox.workspace_source.clear();
  cfg.sandbox.workspace_root = nullptr;
  if (workspace != nullptr && *workspace) {
    cfg.sandbox.workspace_source = workspace->host_path(); // names it in messages
    cfg.sandbox.workspace_root = workspace->root();       // what is bound
  }
  // What the session writes outside /workspace (where its policy lets it)
  // is the session's own and goes with it: never the host's files.
  cfg.sandbox.overlay_writes = true;
  // The policy in force now, kept for the session's life: a reload would
  // replace the worker, and the session's state with it.
  cfg.policies = nullptr;
  cfg.listener = nullptr;
  return cfg;
}

outcome<session_actor> spawn_session(caf::actor_system& sys, session_config cfg) {
  if (cfg.info.id.empty())
    return logic_failure("session: no id");
  // A session's workspace is bound from its lease's fd, never by a path.
  if (cfg.info.workspace.empty() != !cfg.worker.sandbox.workspace_root)
    return logic_failure("session " + cfg.info.id + ": the workspace '" + cfg.info.workspace +
                         "' comes without its lease, or a lease without a workspace");
  if (cfg.info.idle_ttl_ms == 0 || cfg.info.max_lifetime_ms == 0)
    return logic_failure("session " + cfg.info.id + ": its idle TTL and maximum lifetime "
                         "must be at least 1 ms");
  auto checked = resolve_pool_config(cfg.worker);
  if (!checked)
    return checked.error().wrap("session " + cfg.info.id);
  cfg.worker = std::move(*checked);
  return session_actor{sys.spawn(session_impl, std::move(cfg))};
}

} // namespace castellan
