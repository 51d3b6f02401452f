/// @file pool_actor.cpp
/// The pool's state machine. A worker is `starting` until it sends READY,
/// then alternates `ready` (in the idle queue) and `running` (one exec), and
/// is `stopped` once its process has exited and been reaped. The pool
/// releases a worker's fds only after that exit, so the event source never
/// polls a recycled fd number.

#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_internal.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "actors/pool/exec_assembly.hpp"
#include "actors/pool/exec_files.hpp"
#include "actors/pool/exec_setup.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/sha256.hpp"
#include "actors/telemetry/metric_names.hpp"
#include "actors/pool/pool_worker.hpp"
#include "actors/pool/worker_event_source.hpp"
#include "platform/install_layout.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;

/// Exit codes castellan reports for executions it ended itself.
constexpr int32_t timeout_exit_code = 124;
constexpr int32_t cancelled_exit_code = 125;
constexpr int32_t refused_exit_code = 1;
/// A worker killed for a denied optimistic read: 128 + SIGKILL.
constexpr int32_t policy_kill_exit_code = 137;

/// How many finished exec ids a pool remembers, so that a late cancel can
/// say "already finished" rather than "unknown".
constexpr std::size_t finished_ids_kept = 4096;

/// Backoff after a worker fails to start, so a broken interpreter does not
/// turn into a fork loop.
constexpr auto spawn_retry_delay = std::chrono::milliseconds(500);

/// How often the pool reports its gauges (occupancy, ring fill) to telemetry.
constexpr auto gauge_interval = std::chrono::seconds(1);

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

uint64_t micros(clock_type::duration d) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(d).count());
}

struct pending_exec {
  exec_request req;
  caf::typed_response_promise<exec_result> rp;
  clock_type::time_point arrived;
  clock_type::time_point dispatched;
  exec_result result;
  uint32_t request_id = 0;
  uint64_t serial = 0; ///< unique per accepted request: what its deadline refers to
  clock_type::time_point deadline;
  /// What the exec's process applied of the request's tightening (a JSON
  /// object from its RESULT); empty without one.
  std::string tightening_report;
  /// The harness could not start the COMMAND's program (RESULT's exec_error).
  std::optional<harness_exec_error> exec_error;
  /// The policy it runs under, as audit names it, and that policy's
  /// revision: the pool's current one at admission, the worker's generation's
  /// once dispatched (see name_policy).
  std::string policy;
  uint64_t policy_revision = 0;
  /// Security events beyond the result's limit that the audit could not
  /// take either (its window was spent): counted here, named in the result.
  uint64_t events_unrecorded = 0;
  /// The FILE frames of its files_out so far.
  file_collector files;
};

/// One version of what the pool's workers start from: the config its policy
/// makes of the pool, the worker template prepared from it, and the mediator
/// that decides its workers' notifications. A worker keeps the generation it
/// started in, so a reload never changes what a running exec is under.
struct pool_generation {
  uint64_t number = 0;
  pool_config cfg;
  worker_template tpl;
  /// Used by the event source thread only, once a worker is watched with it.
  std::shared_ptr<syscall_mediator> mediator;
  /// A worker of it reached READY: a revision whose workers cannot start is
  /// rolled back before that, never after.
  bool proven = false;
};

/// Prepares generation `number` of a pool under `cfg` (a config its policy
/// was applied to): fails where every worker would.
outcome<std::shared_ptr<pool_generation>> make_generation(pool_config cfg, uint64_t number) {
  auto gen = std::make_shared<pool_generation>();
  gen->number = number;
  gen->cfg = std::move(cfg);
  auto tpl = prepare_worker_template(gen->cfg);
  if (!tpl)
    return tpl.error();
  gen->tpl = std::move(*tpl);
  const auto& c = gen->cfg;
  if (!c.sandbox.notify.empty() && c.mediation_policy) {
    const auto* landlock = gen->tpl.sandbox ? &gen->tpl.sandbox->landlock : nullptr;
    gen->mediator = std::make_shared<syscall_mediator>(
      c.mediation_policy, make_mediation_context(landlock, relay_port_of(c)));
  }
  return gen;
}

struct worker_slot {
  std::unique_ptr<pool_worker> ch;
  std::shared_ptr<const pool_generation> gen; ///< what it was started from
  worker_state state = worker_state::starting;
  std::optional<pending_exec> current;
  uint32_t next_request_id = 1;
  uint32_t execs = 0;
  std::optional<uint64_t> idle_tasks; ///< cgroup tasks when it became ready
  uint64_t cpu_us = 0;  ///< CPU of all its execs so far (the telemetry counter)
  bool killed = false;  ///< we sent SIGKILL; waiting for the exit
  std::string stop_reason;
  /// The worker said it serves no further exec (RESULT's `retire`): why.
  std::optional<std::string> retire;
};

struct pool_state {
  static inline const char* name = "castellan.pool";

  /// The config of the current generation: what new requests are admitted
  /// under and new workers start from.
  pool_config cfg;
  /// The config as given, before its policy: what each reload of the policy
  /// is applied over.
  pool_config base;
  std::shared_ptr<pool_generation> gen; ///< the current generation
  /// The generation before a reload, until one worker of the new one is
  /// ready: what the pool goes back to if none can start.
  std::shared_ptr<pool_generation> previous;
  std::map<uint64_t, worker_slot> workers;
  std::deque<uint64_t> idle;
  std::deque<pending_exec> queue;
  uint64_t next_worker_id = 1;
  uint64_t next_exec_id = 1;
  uint64_t next_serial = 1;
  uint64_t spawned = 0;
  uint64_t completed = 0;
  uint64_t lost = 0;
  /// Recently answered exec ids, oldest first (see finished_ids_kept).
  std::deque<uint64_t> finished_ids;
  std::set<uint64_t> finished_lookup;
  uint32_t spawn_failures = 0; ///< consecutive
  bool refill_scheduled = false;
  bool shutting_down = false;
  std::string last_spawn_error;
  /// Who receives worker state events (subscribe_atom); none: none is made.
  std::vector<worker_state_listener> listeners;
  /// The events this pool may have unhandled at the audit actor; spent, new
  /// requests are answered `busy` (audit_credits.hpp).
  audit_credits credits;
  /// Why the audit cannot take events at all (its actor is down, the join
  /// failed); non-empty: no new exec is admitted.
  std::string audit_down;
  // Declared last, destroyed first: the thread is joined before the worker
  // fds it polls are closed.
  std::unique_ptr<worker_event_source> events;
};

using pool_ptr = pool_internal_actor::stateful_pointer<pool_state>;

worker_state_event state_event(pool_ptr self, uint64_t id, const worker_slot& slot,
                               std::string reason) {
  worker_state_event ev;
  ev.pool = self->state.cfg.name;
  ev.worker_id = id;
  ev.pid = slot.ch ? slot.ch->pid() : 0;
  ev.state = slot.state;
  ev.reason = std::move(reason);
  ev.timestamp_ns = now_ns();
  return ev;
}

void publish(pool_ptr self, uint64_t id, const worker_slot& slot, std::string reason = {}) {
  const auto& listeners = self->state.listeners;
  if (listeners.empty())
    return;
  const auto ev = state_event(self, id, slot, std::move(reason));
  for (const auto& l : listeners)
    self->send(l, ev);
}

void count(pool_ptr self, const char* metric) {
  const auto& cfg = self->state.cfg;
  if (cfg.telemetry)
    self->send(cfg.telemetry, counter_increment{metric, {{"pool", cfg.name}}, 1});
}

/// Names the policy `p` runs under in `cfg` (the config of the generation
/// that runs it): the request's own (a tightened exec), without a revision,
/// else the pool's, with the revision in force in that generation.
void name_policy(pending_exec& p, const exec_request& req, const pool_config& cfg) {
  if (!req.policy_name.empty()) {
    p.policy = req.policy_name;
    p.policy_revision = 0;
    return;
  }
  p.policy = cfg.policy_name;
  p.policy_revision = cfg.policy ? cfg.policy->revision() : 0;
}

/// Tells telemetry and audit (unless `audited` is false) how an exec ended.
void observe(pool_ptr self, const pending_exec& p, bool audited = true) {
  const auto& r = p.result;
  const auto& policy = p.policy;
  const auto& cfg = self->state.cfg;
  if (cfg.telemetry)
    self->send(cfg.telemetry,
               exec_observation{cfg.name, r.error, r.timing.queue_us, r.timing.run_us});
  if (!cfg.audit || !audited)
    return;
  for (const auto& e : r.events)
    post_audit(self, cfg.audit, self->state.credits,
               security_event{r.exec_id, cfg.name, r.worker_id, policy, e});
  post_audit(self, cfg.audit, self->state.credits,
             exec_finished{r.exec_id, cfg.name, r.worker_id, policy, r.error, r.exit_code, r.timing,
                           r.usage, r.detail, now_ns(), p.policy_revision});
}

void remember_finished(pool_ptr self, uint64_t exec_id) {
  auto& st = self->state;
  if (!st.finished_lookup.insert(exec_id).second)
    return;
  st.finished_ids.push_back(exec_id);
  if (st.finished_ids.size() > finished_ids_kept) {
    st.finished_lookup.erase(st.finished_ids.front());
    st.finished_ids.pop_front();
  }
}

void finish(pool_ptr self, pending_exec& p) {
  // Answered without its RESULT, a file may be half received: say so
  // rather than hand over its first pieces as the whole file.
  p.files.abandon(p.result.files);
  if (p.serial != 0 && self->state.events)
    self->state.events->disarm_deadline(p.serial);
  p.result.timing.run_us = micros(clock_type::now() - p.dispatched);
  if (p.events_unrecorded > 0)
    p.result.detail += (p.result.detail.empty() ? "" : "; ") +
                       std::to_string(p.events_unrecorded) +
                       " security events beyond the result's limit were not recorded: the "
                       "audit log was behind";
  observe(self, p);
  remember_finished(self, p.result.exec_id);
  p.rp.deliver(std::move(p.result));
  ++self->state.completed;
}

/// Answers a request that never reached a worker; audited unless `audited`
/// is false.
void refuse(pool_ptr self, pending_exec& p, error_class cls, std::string detail,
            int32_t exit_code = refused_exit_code, bool audited = true) {
  if (p.serial != 0 && self->state.events)
    self->state.events->disarm_deadline(p.serial);
  p.result.error = cls;
  p.result.exit_code = exit_code;
  p.result.detail = std::move(detail);
  p.result.timing.queue_us = micros(clock_type::now() - p.arrived);
  observe(self, p, audited);
  remember_finished(self, p.result.exec_id);
  p.rp.deliver(std::move(p.result));
}

void schedule_refill(pool_ptr self);
bool roll_back(pool_ptr self);

/// Starts one worker in the background (it reports READY on its doorbell).
void spawn_one(pool_ptr self) {
  auto& st = self->state;
  const uint64_t id = st.next_worker_id++;
  const auto& gen = st.gen;
  auto ch = pool_worker::start(id, gen->cfg, gen->tpl);
  if (!ch) {
    st.last_spawn_error = ch.error().describe();
    ++st.spawn_failures;
    spdlog::error("pool {}: {}", st.cfg.name, st.last_spawn_error);
    if (roll_back(self))
      return;
    schedule_refill(self);
    return;
  }
  ++st.spawned;
  count(self, metric_names::worker_spawns);
  st.events->watch(id, (*ch)->doorbell_fd(), (*ch)->pidfd(), (*ch)->control_fd(),
                   gen->mediator);
  auto& slot = st.workers[id];
  slot.ch = std::move(*ch);
  slot.gen = gen;
  // egress: the proxy serves the connections that arrive on this worker's socket.
  if (auto link = slot.ch->take_egress_link(); link && gen->cfg.proxy)
    self->send(gen->cfg.proxy,
               egress_link{st.cfg.name, id, std::make_shared<unique_fd>(std::move(link)),
                           policy_snapshot{gen->cfg.egress_policy}, slot.ch->exec_marker()});
  publish(self, id, slot);
}

/// Brings the number of live workers back to the configured size.
void refill(pool_ptr self) {
  auto& st = self->state;
  if (st.shutting_down)
    return;
  // After repeated failures, wait for the delayed refill instead of retrying
  // on every exit.
  if (st.spawn_failures > 0 && st.refill_scheduled)
    return;
  while (st.workers.size() < st.cfg.size && !st.refill_scheduled)
    spawn_one(self);
}

void schedule_refill(pool_ptr self) {
  auto& st = self->state;
  if (st.refill_scheduled)
    return;
  st.refill_scheduled = true;
  self->delayed_send(self, spawn_retry_delay, refill_atom::value);
  // No worker can start: fail the queue instead of letting it wait forever.
  if (st.workers.empty()) {
    while (!st.queue.empty()) {
      refuse(self, st.queue.front(), error_class::worker_lost,
             "no worker could be started: " + st.last_spawn_error);
      st.queue.pop_front();
    }
  }
}

/// Adds a piece of the running exec's output to its result (within the
/// pool's limit) and, when its request asked for it, hands what was added
/// to the request's output sink.
void take_output(pool_ptr self, pending_exec& p, bool is_stderr, std::string_view payload) {
  const auto& cfg = self->state.cfg;
  auto& r = p.result;
  std::string& out = is_stderr ? r.stderr_data : r.stdout_data;
  const std::size_t before = out.size();
  append_capped(out, is_stderr ? r.stderr_truncated : r.stdout_truncated, payload,
                is_stderr ? cfg.stderr_limit : cfg.stdout_limit);
  if (p.req.output_sink && out.size() > before)
    // Anonymous: the sink is dynamically typed, and needs no sender. It is
    // enqueued before the result leaves this pool, so it arrives first.
    caf::anon_send(p.req.output_sink, exec_output_atom::value,
                   exec_output{r.exec_id, is_stderr, out.substr(before)});
}

/// Collects the output the worker wrote but did not ring for (it rings for
/// output only when its ring is half full): what an exec produced before it
/// was killed belongs in its result. Stops at anything but output.
void salvage_output(pool_ptr self, worker_slot& slot) {
  auto& p = *slot.current;
  for (;;) {
    auto rd = slot.ch->receive();
    if (rd.status != ipc::ring_status::ok || rd.value.request_id != p.request_id)
      return;
    if (rd.value.type == ipc::message_type::stdout_data)
      take_output(self, p, false, rd.value.payload);
    else if (rd.value.type == ipc::message_type::stderr_data)
      take_output(self, p, true, rd.value.payload);
    else
      return;
  }
}

/// Kills worker `id`. The exec it was running (if any) is answered now with
/// `cls`; the slot goes away when the process exit is observed.
void terminate(pool_ptr self, uint64_t id, worker_slot& slot, error_class cls, int32_t exit_code,
               std::string detail) {
  // Kill first: the exec stops consuming anything now, and its output so far
  // is still in the (mapped) ring to salvage.
  const bool kill_now = !slot.killed;
  if (kill_now) {
    const auto report = slot.ch->kill();
    spdlog::debug("pool {}: worker {} killed: {}", self->state.cfg.name, id, report.describe());
  }
  if (slot.current) {
    // After a policy kill nothing more the worker wrote is trusted into the
    // result: only what was collected before the violation stays.
    if (kill_now && cls != error_class::policy_kill)
      salvage_output(self, slot);
    auto& p = *slot.current;
    p.result.error = cls;
    p.result.exit_code = exit_code;
    p.result.detail = detail;
    p.result.usage = slot.ch->exec_usage();
    p.result.enforcement = slot.ch->enforcement();
    finish(self, p);
    slot.current.reset();
  }
  auto& idle = self->state.idle;
  idle.erase(std::remove(idle.begin(), idle.end(), id), idle.end());
  if (kill_now) {
    count(self, cls == error_class::ok ? metric_names::worker_recycles : metric_names::worker_kills);
    slot.killed = true;
    slot.stop_reason = std::move(detail);
  }
}

void start_exec(pool_ptr self, uint64_t id, worker_slot& slot, pending_exec p) {
  p.dispatched = clock_type::now();
  p.result.timing.queue_us = micros(p.dispatched - p.arrived);
  p.result.worker_id = id;
  if (slot.gen)
    name_policy(p, p.req, slot.gen->cfg);
  p.request_id = slot.next_request_id++;
  // egress: connections the code opens are recorded under this exec.
  slot.ch->set_exec(p.req.exec_id);
  outcome<void> sent;
  // The frames that announce the CODE or COMMAND come right before it
  // (docs/wire.md); the exec handler admitted the request only when all of
  // them fit the ring together.
  if (!p.req.tightening.empty())
    // The child forked for the CODE applies it before the code runs; the
    // exec handler admitted only CODE requests to a fork-mode pool.
    sent = slot.ch->send(ipc::message_type::tighten, p.request_id, p.req.tightening);
  if (sent && has_setup(p.req))
    sent = slot.ch->send(ipc::message_type::setup, p.request_id, encode_setup(p.req));
  if (sent && p.req.argv.empty()) {
    sent = slot.ch->send(ipc::message_type::code, p.request_id, p.req.code);
  } else if (sent) {
    std::string argv;
    for (const auto& a : p.req.argv) {
      argv += a;
      argv.push_back('\0');
    }
    sent = slot.ch->send(ipc::message_type::command, p.request_id, argv);
  }
  if (!sent) {
    // The request never ran: put it back at the head of the queue.
    self->state.queue.push_front(std::move(p));
    terminate(self, id, slot, error_class::worker_lost, refused_exit_code,
              "worker " + std::to_string(id) + ": " + sent.error().describe());
    return;
  }
  if (const auto& cfg = self->state.cfg; cfg.audit) {
    const bool code_mode = p.req.argv.empty();
    exec_started started;
    started.exec_id = p.req.exec_id;
    started.pool = cfg.name;
    started.worker_id = id;
    started.policy = p.policy;
    if (code_mode) {
      started.code_sha256 = sha256_hex(p.req.code);
      started.code_size = p.req.code.size();
    }
    started.argv = p.req.argv;
    started.timestamp_ns = now_ns();
    started.policy_revision = p.policy_revision;
    started.origin = p.req.origin;
    for (const auto& e : p.req.env)
      started.env_names.push_back(e.substr(0, e.find('=')));
    started.cwd = p.req.cwd;
    started.stdin_size = p.req.stdin_data.size();
    post_audit(self, cfg.audit, self->state.credits, std::move(started));
  }
  slot.current = std::move(p);
  slot.state = worker_state::running;
  publish(self, id, slot);
}

uint64_t timeout_ms_of(pool_ptr self, const exec_request& req) {
  return req.timeout_ms ? req.timeout_ms : self->state.cfg.default_timeout_ms;
}

/// Answers a queued request whose deadline passed before a worker was free.
void expire_queued(pool_ptr self, std::deque<pending_exec>::iterator it) {
  auto& st = self->state;
  pending_exec p = std::move(*it);
  st.queue.erase(it);
  refuse(self, p, error_class::timeout,
         "deadline of " + std::to_string(timeout_ms_of(self, p.req)) +
           " ms reached while queued (no worker was free)",
         timeout_exit_code);
}

/// Why `req` cannot be sent to a worker of `cfg` (its code limit, its ring);
/// empty when it can.
std::string too_large(const pool_config& cfg, const exec_request& req) {
  if (req.code.size() > cfg.code_limit)
    return "code is " + std::to_string(req.code.size()) + " bytes; the limit is " +
           std::to_string(cfg.code_limit);
  // The request's frames go into the ring back to back (start_exec).
  constexpr uint64_t frame_header = 4 + 5;
  uint64_t frames = frame_header + req.code.size();
  for (const auto& a : req.argv)
    frames += a.size() + 1;
  if (!req.tightening.empty())
    frames += frame_header + req.tightening.size();
  if (has_setup(req))
    frames += frame_header + setup_bytes(req);
  if (frames > cfg.ring_capacity)
    return "the request is " + std::to_string(frames) +
           " bytes on the wire (code or argv, stdin, env, cwd, files_in and tightening); the "
           "ring holds " +
           std::to_string(cfg.ring_capacity);
  return {};
}

/// Hands queued requests to idle workers.
/// Whether an idle worker is ready to take a request now.
bool has_ready_worker(const pool_state& st) {
  return std::any_of(st.idle.begin(), st.idle.end(), [&](uint64_t id) {
    auto it = st.workers.find(id);
    return it != st.workers.end() && it->second.state == worker_state::ready &&
           !it->second.killed;
  });
}

void dispatch(pool_ptr self) {
  auto& st = self->state;
  while (!st.queue.empty() && !st.idle.empty()) {
    if (st.queue.front().deadline <= clock_type::now()) {
      // Its timer is due; never start an exec whose time is up.
      expire_queued(self, st.queue.begin());
      continue;
    }
    const uint64_t id = st.idle.front();
    st.idle.pop_front();
    auto it = st.workers.find(id);
    if (it == st.workers.end() || it->second.state != worker_state::ready || it->second.killed)
      continue;
    pending_exec p = std::move(st.queue.front());
    st.queue.pop_front();
    // Admitted under an earlier revision, it may not fit this worker's ring.
    if (auto why = too_large(st.cfg, p.req); !why.empty()) {
      st.idle.push_front(id);
      refuse(self, p, error_class::limit_exceeded, std::move(why));
      continue;
    }
    start_exec(self, id, it->second, std::move(p));
  }
}

/// The worker's enforcement report with what the exec's process applied of
/// its request's tightening under "tightening" (unchanged without one).
std::string with_tightening(const std::string& enforcement, const std::string& report) {
  if (report.empty())
    return enforcement;
  auto merged = enforcement.empty() ? nlohmann::json::object()
                                    : nlohmann::json::parse(enforcement, nullptr, false);
  if (!merged.is_object())
    merged = nlohmann::json::object();
  merged["tightening"] = nlohmann::json::parse(report, nullptr, false);
  return merged.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Why a worker of generation `old` is replaced.
std::string superseded(const pool_state& st, const pool_generation& old) {
  const auto& now = st.gen->cfg.policy;
  return "policy " + (now ? now->name() + " revision " + std::to_string(now->revision())
                          : std::string("reload")) +
         " replaced the one it started under (generation " + std::to_string(old.number) + ")";
}

/// Audits a revision of the pool's policy the pool could not take.
void reject_reload(pool_ptr self, const policy_updated& u, const std::string& why) {
  auto& st = self->state;
  spdlog::error("pool {}: policy {} revision {} not applied: {}", st.cfg.name, u.policy_name,
                u.revision, why);
  if (st.cfg.audit)
    post_audit(self, st.cfg.audit, st.credits,
               policy_rejection{u.policy_name, u.path,
                                {"pool " + st.cfg.name + ": revision " +
                                 std::to_string(u.revision) + " not applied: " + why},
                                now_ns()});
}

/// Replaces the idle and starting workers of every generation but the
/// current one; running ones are replaced when their exec ends (complete()).
void retire_other_generations(pool_ptr self) {
  auto& st = self->state;
  for (auto& [id, slot] : st.workers)
    if (slot.gen != st.gen && !slot.current && !slot.killed)
      terminate(self, id, slot, error_class::ok, 0, superseded(st, *slot.gen));
}

/// No worker of a freshly reloaded revision could start: back to the
/// revision before it, audited like a revision the pool cannot apply. False
/// when there is nothing to go back to (the revision has proven itself, or
/// the pool never reloaded).
bool roll_back(pool_ptr self) {
  auto& st = self->state;
  if (!st.previous || st.gen->proven)
    return false;
  const auto failed = st.gen;
  st.gen = std::move(st.previous);
  st.previous.reset();
  st.cfg = st.gen->cfg;
  st.spawn_failures = 0;
  if (const auto& p = failed->cfg.policy) {
    policy_updated u;
    u.policy_name = p->name();
    u.revision = p->revision();
    reject_reload(self, u, "its workers cannot start (" + st.last_spawn_error +
                             "); back to revision " +
                             std::to_string(st.cfg.policy ? st.cfg.policy->revision() : 0));
  }
  retire_other_generations(self);
  return true;
}

/// A newer revision of the pool's policy: workers started from now on run
/// under it. Idle and starting workers of older generations are replaced at
/// once; running ones finish their exec first (complete()).
void on_policy_updated(pool_ptr self, policy_updated& u) {
  auto& st = self->state;
  const auto& current = st.gen->cfg.policy;
  if (st.shutting_down || !current || u.policy_name != current->name() || !u.snapshot ||
      u.revision <= current->revision())
    return;
  auto applied = resolved_under(st.base, u.snapshot.policy);
  if (!applied) {
    reject_reload(self, u, applied.error().describe());
    return;
  }
  // The egress relay needs the proxy, which the supervisor gives a pool
  // that follows a policy; a pool spawned without one cannot take network.
  if (applied->egress_policy && !applied->proxy) {
    reject_reload(self, u, "the policy allows network, and this pool has no egress proxy");
    return;
  }
  auto gen = make_generation(std::move(*applied), st.gen->number + 1);
  if (!gen) {
    reject_reload(self, u, gen.error().describe());
    return;
  }
  // The revision to go back to is the last one whose workers started.
  if (st.gen->proven || !st.previous)
    st.previous = st.gen;
  st.gen = std::move(*gen);
  st.cfg = st.gen->cfg;
  st.spawn_failures = 0;
  spdlog::info("pool {}: policy {} revision {} in force (generation {})", st.cfg.name,
               u.policy_name, u.revision, st.gen->number);
  retire_other_generations(self);
  refill(self);
}

/// A worker finished its exec: back to the idle queue, or retired.
void complete(pool_ptr self, uint64_t id, worker_slot& slot) {
  slot.ch->set_exec(0);
  auto& r = slot.current->result;
  r.usage = slot.ch->exec_usage();
  r.enforcement = with_tightening(slot.ch->enforcement(), slot.current->tightening_report);
  // The OOM killer may have taken a process of the exec (the fork-mode
  // child, or one the code started) while the harness lived to report.
  const bool oom = slot.ch->oom_killed();
  const auto& started_under = slot.gen->cfg;
  if (oom) {
    r.error = error_class::oom;
    r.detail = "out of memory: the cgroup's memory limit (" +
               std::to_string(started_under.limits.memory_bytes) + " bytes) was hit";
  } else if (started_under.isolation != platform::isolation_mode::none) {
    const auto& argv = slot.current->req.argv;
    const auto& sandbox = started_under.sandbox;
    r.detail = slot.current->exec_error
                 ? explain_exec_error(argv, *slot.current->exec_error, sandbox)
                 : explain_nested_refused_exec(argv, r.exit_code, r.stderr_data, sandbox);
  }
  if (const auto& cfg = self->state.cfg; cfg.telemetry) {
    const auto& usage = slot.current->result.usage;
    slot.cpu_us += usage.cpu_us;
    self->send(cfg.telemetry, worker_usage{cfg.name, id, usage.peak_memory_bytes, slot.cpu_us});
  }
  finish(self, *slot.current);
  slot.current.reset();
  ++slot.execs;
  auto& st = self->state;
  // Processes or threads the exec left behind would carry its state into
  // the next one (and hold pids): such a worker is replaced, not reused.
  // A session's worker carries its state on purpose: what its code left
  // running is the session's (within the cgroup's pids limit).
  if (const auto now = slot.ch->tasks();
      st.cfg.mode != exec_mode::session && now && slot.idle_tasks && *now > *slot.idle_tasks) {
    terminate(self, id, slot, error_class::ok, 0,
              "the exec left " + std::to_string(*now - *slot.idle_tasks) +
                " task(s) behind (" + std::to_string(*now) + " in the cgroup, " +
                std::to_string(*slot.idle_tasks) + " when idle)");
    return;
  }
  if (oom) {
    terminate(self, id, slot, error_class::ok, 0, "replaced after an out-of-memory kill");
    return;
  }
  // Its policy was reloaded while it ran: the next exec runs under the new one.
  if (slot.gen != st.gen) {
    terminate(self, id, slot, error_class::ok, 0, superseded(st, *slot.gen));
    return;
  }
  // Fork mode: what the exec left (a process, a file it cannot remove) could
  // not be put back, so the next exec would find it.
  if (slot.retire) {
    terminate(self, id, slot, error_class::ok, 0, "retired: " + *slot.retire);
    return;
  }
  if (st.cfg.recycle_after != 0 && slot.execs >= st.cfg.recycle_after) {
    terminate(self, id, slot, error_class::ok, 0, "recycled after " + std::to_string(slot.execs) +
                                                    " execs");
    return;
  }
  slot.state = worker_state::ready;
  publish(self, id, slot);
  st.idle.push_back(id);
}

/// Handles one frame; a failure means the worker broke the protocol.
outcome<void> on_frame(pool_ptr self, uint64_t id, worker_slot& slot, ipc::frame& f) {
  using ipc::message_type;
  auto& cfg = self->state.cfg;
  switch (f.type) {
    case message_type::ready:
      if (slot.state != worker_state::starting)
        return logic_failure("READY while " + to_string(slot.state));
      slot.state = worker_state::ready;
      slot.idle_tasks = slot.ch->tasks();
      self->state.spawn_failures = 0;
      if (slot.gen == self->state.gen) {
        self->state.gen->proven = true;
        self->state.previous.reset();
      }
      publish(self, id, slot);
      self->state.idle.push_back(id);
      return {};
    case message_type::stdout_data:
    case message_type::stderr_data: {
      if (!slot.current || f.request_id != slot.current->request_id)
        return {}; // late output of an exec already answered
      take_output(self, *slot.current, f.type == message_type::stderr_data, f.payload);
      return {};
    }
    case message_type::file: {
      if (!slot.current || f.request_id != slot.current->request_id)
        return logic_failure("FILE for request " + std::to_string(f.request_id) +
                             " that is not running");
      auto& current = *slot.current;
      return current.files.take(f.payload, current.result.files);
    }
    case message_type::result: {
      if (!slot.current || f.request_id != slot.current->request_id)
        return logic_failure("RESULT for request " + std::to_string(f.request_id) +
                             " that is not running");
      auto& current = *slot.current;
      if (auto ok = current.files.finish(); !ok)
        return ok;
      result_extras extras;
      if (auto ok = apply_result_payload(f.payload, current.result, extras); !ok)
        return ok;
      const bool narrowed = !current.req.tightening.empty();
      if (extras.retire)
        slot.retire = std::move(extras.retire);
      const bool retired_refusal = extras.refused && slot.retire && !extras.tightening;
      if (extras.refused && !narrowed && !retired_refusal)
        return logic_failure("RESULT refuses a request that came without a tightening");
      if (extras.tightening && !narrowed)
        return logic_failure("RESULT reports a tightening the request did not have");
      if (narrowed && !extras.refused && !extras.tightening)
        // The code ran and nothing says it ran narrowed: a harness that
        // does not apply TIGHTEN frames. Fail closed: this worker goes.
        return logic_failure("RESULT of a tightened request does not confirm the tightening");
      if (retired_refusal) {
        // Cannot happen with this pool (it replaces a worker that retired
        // before it sends another request), but the harness's own lock
        // answers so: the code did not run.
        current.result.error = error_class::worker_lost;
        current.result.has_exception = false;
        current.result.detail = "the worker refused to run the code: " + *extras.refused;
      } else if (extras.refused) {
        // Like a layer a new worker cannot apply: the request is not run
        // with less than it asked for.
        current.result.error = error_class::worker_lost;
        current.result.has_exception = false;
        current.result.detail = "request policy '" + current.policy +
                                "' could not be applied to the exec's process, so its code "
                                "did not run: " +
                                *extras.refused;
      }
      if (extras.exec_error && current.req.argv.empty())
        return logic_failure("RESULT reports an exec error for a CODE request");
      current.exec_error = std::move(extras.exec_error);
      if (extras.tightening)
        current.tightening_report = std::move(*extras.tightening);
      complete(self, id, slot);
      return {};
    }
    case message_type::state:
    case message_type::warn:
      spdlog::debug("pool {}: worker {}: {} {}", cfg.name, id, to_string(f.type), f.payload);
      return {};
    case message_type::fs_read:
    case message_type::fs_write:
    case message_type::net_connect:
    case message_type::exec:
    case message_type::listdir:
      // This pool mediates through the kernel (seccomp notify) rather than
      // worker hooks; a hook request is answered with a denial so a worker
      // that asks never proceeds on its own.
      return slot.ch->send(message_type::deny, f.request_id,
                           "pool " + cfg.name + " does not serve worker-side policy checks");
    default:
      return logic_failure(std::string("unexpected frame type ") + std::string(to_string(f.type)));
  }
}

void on_doorbell(pool_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.workers.find(id);
  if (it == st.workers.end() || it->second.killed)
    return;
  auto& slot = it->second;
  bool drained = false;
  for (;;) {
    auto rd = slot.ch->receive();
    if (rd.status == ipc::ring_status::empty)
      break;
    drained = true;
    outcome<void> ok;
    if (rd.status == ipc::ring_status::ok)
      ok = on_frame(self, id, slot, rd.value);
    else
      ok = logic_failure(rd.error.empty() ? std::string("corrupt ring") : rd.error);
    if (!ok) {
      spdlog::warn("pool {}: worker {} broke the protocol: {}", st.cfg.name, id,
                   ok.error().describe());
      ++st.lost;
      terminate(self, id, slot, error_class::worker_lost, refused_exit_code,
                "worker " + std::to_string(id) + " broke the protocol: " + ok.error().describe());
      break;
    }
    if (slot.killed)
      break;
  }
  // Output of a running exec may have filled the ring: tell the harness there
  // is room again (a worker saturating its doorbell is a protocol violation).
  if (drained && slot.current && !slot.killed) {
    if (auto ok = slot.ch->wake(); !ok)
      terminate(self, id, slot, error_class::worker_lost, refused_exit_code,
                "worker " + std::to_string(id) + ": " + ok.error().describe());
  }
  dispatch(self);
}

void on_exited(pool_ptr self, uint64_t id) {
  auto& st = self->state;
  auto it = st.workers.find(id);
  if (it == st.workers.end())
    return;
  auto& slot = it->second;
  std::string how = slot.ch->reap();
  if (slot.current) {
    ++st.lost;
    // The cgroup's OOM killer ended it: the exec hit the memory limit.
    const bool oom = slot.ch->oom_killed();
    // Its exit status is whatever the code made it: the harness never
    // answered, so the code ended it or replaced it with another program
    // (a layer is never inferred from that status).
    terminate(self, id, slot, oom ? error_class::oom : error_class::worker_lost,
              refused_exit_code,
              "worker " + std::to_string(id) + " " + how + " during the exec" +
                (oom ? " (out of memory: the cgroup's memory limit was hit)"
                     : " without the harness's answer: the code ended the harness or "
                       "replaced it with another program"));
  }
  bool rolled_back = false;
  if (slot.state == worker_state::starting && !slot.killed) {
    st.last_spawn_error = "worker " + std::to_string(id) + " " + how + " before it was ready";
    ++st.spawn_failures;
    spdlog::error("pool {}: {}", st.cfg.name, st.last_spawn_error);
    rolled_back = slot.gen == st.gen && roll_back(self);
  }
  st.events->unwatch(id);
  if (st.cfg.proxy && slot.ch->exec_marker())
    self->send(st.cfg.proxy, egress_detach_atom::value, st.cfg.name, id);
  if (!slot.killed && slot.state == worker_state::ready && st.cfg.audit)
    post_audit(self, st.cfg.audit, st.credits,
               worker_lost_event{st.cfg.name, id, slot.ch->pid(), 0, how, now_ns()});
  if (st.cfg.telemetry)
    self->send(st.cfg.telemetry, worker_retired{st.cfg.name, id});
  slot.state = worker_state::stopped;
  publish(self, id, slot, slot.stop_reason.empty() ? how : slot.stop_reason + " (" + how + ")");
  auto& idle = st.idle;
  idle.erase(std::remove(idle.begin(), idle.end(), id), idle.end());
  st.workers.erase(it);
  if (st.spawn_failures > 0 && !rolled_back)
    schedule_refill(self);
  else
    refill(self);
}

cancel_reply cancel(pool_ptr self, uint64_t exec_id) {
  auto& st = self->state;
  cancel_reply reply;
  reply.exec_id = exec_id;
  reply.pool = st.cfg.name;
  for (auto& [id, slot] : st.workers) {
    if (!slot.current || slot.current->req.exec_id != exec_id)
      continue;
    terminate(self, id, slot, error_class::cancelled, cancelled_exit_code,
              "cancelled by request after " +
                std::to_string(micros(clock_type::now() - slot.current->dispatched) / 1000) +
                " ms");
    reply.outcome = cancel_outcome::cancelled_running;
    reply.detail = "exec " + std::to_string(exec_id) + " was running on worker " +
                   std::to_string(id) + ": the worker was killed";
    dispatch(self);
    return reply;
  }
  for (auto it = st.queue.begin(); it != st.queue.end(); ++it) {
    if (it->req.exec_id != exec_id)
      continue;
    pending_exec p = std::move(*it);
    st.queue.erase(it);
    refuse(self, p, error_class::cancelled, "cancelled by request while queued",
           cancelled_exit_code);
    reply.outcome = cancel_outcome::cancelled_queued;
    reply.detail = "exec " + std::to_string(exec_id) + " was queued: it never ran";
    return reply;
  }
  if (st.finished_lookup.count(exec_id) != 0) {
    reply.outcome = cancel_outcome::already_finished;
    reply.detail = "exec " + std::to_string(exec_id) + " had already finished";
  } else {
    reply.outcome = cancel_outcome::unknown;
    reply.pool.clear();
    reply.detail = "pool " + st.cfg.name + " has no record of exec " + std::to_string(exec_id);
  }
  return reply;
}

/// A decided system call of worker `id`: into the running exec's events
/// (they reach audit with its result), or straight to audit when no exec is
/// running (start-up) or the exec has too many already.
void on_policy_event(pool_ptr self, uint64_t id, policy_event ev) {
  auto& st = self->state;
  auto it = st.workers.find(id);
  const bool running = it != st.workers.end() && it->second.current && !it->second.killed;
  if (running && it->second.current->result.events.size() < st.cfg.events_limit) {
    it->second.current->result.events.push_back(std::move(ev));
    return;
  }
  if (!st.cfg.audit)
    return;
  if (st.credits.exhausted() || !st.audit_down.empty()) {
    // A flood of denials (code looping on a refused call) must not grow the
    // audit's mailbox past the pool's window: counted, not sent. The exec's
    // result and its exec_end record say how many.
    if (running)
      ++it->second.current->events_unrecorded;
    if (st.cfg.telemetry)
      self->send(st.cfg.telemetry,
                 counter_increment{metric_names::audit_dropped, {{"sink", "pool"}}, 1});
    return;
  }
  post_audit(self, st.cfg.audit, st.credits,
             security_event{running ? it->second.current->result.exec_id : 0, st.cfg.name, id,
                            running ? it->second.current->policy : st.cfg.policy_name,
                            std::move(ev)});
}

void on_optimistic_violation(pool_ptr self, optimistic_violation& v) {
  auto& st = self->state;
  const uint64_t id = v.worker_id;
  const std::string detail = "worker " + std::to_string(id) + " killed: policy '" + v.policy +
                             "' denies " + v.event.syscall + " of " + v.event.target +
                             " (rule " + v.event.rule + ")";
  on_policy_event(self, id, std::move(v.event));
  auto it = st.workers.find(id);
  if (it == st.workers.end())
    return;
  ++st.lost;
  terminate(self, id, it->second, error_class::policy_kill, policy_kill_exit_code, detail);
}

/// Each live worker with its cgroup's numbers (the `usage_atom` answer).
std::vector<worker_stats> worker_usage_now(pool_ptr self) {
  std::vector<worker_stats> out;
  for (const auto& [id, slot] : self->state.workers) {
    if (!slot.ch)
      continue;
    worker_stats w;
    w.worker_id = id;
    w.pid = slot.ch->pid();
    w.state = slot.state;
    w.execs = slot.execs;
    if (auto u = slot.ch->cgroup_usage()) {
      w.has_cgroup = true;
      w.cpu_us = u->cpu_usec.value_or(0);
      w.memory_bytes = u->memory_current_bytes.value_or(0);
      w.memory_peak_bytes = u->memory_peak_bytes.value_or(0);
      w.pids = u->pids_current.value_or(0);
    }
    out.push_back(w);
  }
  return out;
}

pool_status make_status(pool_ptr self) {
  auto& st = self->state;
  pool_status s;
  s.name = st.cfg.name;
  for (auto& [id, slot] : st.workers) {
    ++s.size;
    switch (slot.state) {
      case worker_state::starting:
        ++s.starting;
        break;
      case worker_state::ready:
        ++s.idle;
        break;
      case worker_state::running:
        ++s.busy;
        break;
      case worker_state::stopped:
        break;
    }
  }
  s.queued = static_cast<uint32_t>(st.queue.size());
  s.queue_limit = st.cfg.queue_limit;
  if (const auto& p = st.cfg.policy) {
    s.policy = p->name();
    s.policy_revision = p->revision();
  }
  s.spawned = st.spawned;
  s.completed = st.completed;
  s.lost = st.lost;
  return s;
}

pool_internal_actor::behavior_type pool_impl(pool_ptr self, pool_config base,
                                             pool_config applied) {
  auto& st = self->state;
  st.base = std::move(base);
  st.cfg = applied;
  if (st.base.listener)
    st.listeners.push_back(st.base.listener);
  // Join the audit's flow control before anything is audited: events sent
  // before the join would never be credited back.
  // Without the audit, the pool admits nothing it could not record.
  if (st.cfg.audit) {
    self->monitor(st.cfg.audit);
    self->set_down_handler([=](caf::down_msg& dm) {
      auto& s = self->state;
      if (dm.source != s.cfg.audit.address() || !s.audit_down.empty())
        return;
      s.audit_down = "the audit actor is down (" + self->system().render(dm.reason) + ")";
      spdlog::error("pool {}: {}: no new exec is admitted", s.cfg.name, s.audit_down);
    });
    self->request(st.cfg.audit, caf::infinite, audit_join_atom::value)
      .then([=](uint64_t window) { self->state.credits.set_window(window); },
            [=](caf::error& err) {
              auto& s = self->state;
              s.audit_down = "joining the audit failed (" + self->system().render(err) + ")";
              spdlog::error("pool {}: {}: no new exec is admitted", s.cfg.name, s.audit_down);
            });
  }
  auto gen = make_generation(std::move(applied), 1);
  auto events = gen ? worker_event_source::start(caf::actor_cast<caf::strong_actor_ptr>(self))
                    : outcome<std::unique_ptr<worker_event_source>>(gen.error());
  if (events) {
    st.gen = std::move(*gen);
    st.events = std::move(*events);
    refill(self);
    if (st.cfg.telemetry)
      self->send(self, gauge_tick_atom::value);
    // Reloads of the policy arrive as policy_updated (internal messages).
    if (st.base.policies && st.cfg.policy) {
      self->send(st.base.policies, subscribe_atom::value, caf::actor_cast<caf::actor>(self));
      // A revision published between the snapshot this pool was given and
      // its subscription would never be announced to it: ask once, after
      // subscribing (the answer cannot overtake the subscription).
      self->request(st.base.policies, caf::infinite, policy_get_atom::value, st.cfg.policy->name())
        .then(
          [=](policy_snapshot& snap) {
            policy_updated u;
            u.policy_name = snap ? snap->name() : std::string{};
            u.revision = snap ? snap->revision() : 0;
            u.snapshot = std::move(snap);
            on_policy_updated(self, u);
          },
          [=](caf::error& err) {
            spdlog::error("pool {}: policy {}: {}", self->state.cfg.name,
                          self->state.cfg.policy->name(), self->system().render(err));
          });
    }
  } else {
    // Without its worker template no worker can start, and without its
    // event source the pool can never hear from one: quit before the first
    // message, and let the supervisor report the failure.
    spdlog::critical("pool {}: {}", st.cfg.name, events.error().describe());
    self->quit(make_error(castellan_errc::spawn_failed, events.error()));
  }
  return {
    [=](exec_atom, exec_request& req) -> caf::result<exec_result> {
      auto& s = self->state;
      if (req.code.empty() && req.argv.empty())
        return make_error(castellan_errc::invalid_request, "exec: neither code nor argv given");
      if (auto why = check_setup(req); !why.empty())
        return make_error(castellan_errc::invalid_request, "exec: " + why);
      // Only a process forked for the exec can be narrowed (a shared
      // interpreter would keep the restrictions), and command mode runs no
      // such process. (Checked before the response promise exists: an error
      // returned after it would never reach the requester.)
      if (!req.tightening.empty() && (s.cfg.mode != exec_mode::isolated || !req.argv.empty()))
        return make_error(castellan_errc::invalid_request,
                          "exec: pool " + s.cfg.name +
                              " can narrow only code requests in isolated mode (it runs " +
                              to_string(s.cfg.mode) + ")");
      pending_exec p;
      p.rp = self->make_response_promise<exec_result>();
      p.arrived = clock_type::now();
      if (req.exec_id == 0)
        req.exec_id = s.next_exec_id++;
      p.result.exec_id = req.exec_id;
      file_collector::prepare(req.files_out, p.result.files);
      name_policy(p, req, s.cfg);
      if (auto why = too_large(s.cfg, req); !why.empty()) {
        refuse(self, p, error_class::limit_exceeded, std::move(why));
        return p.rp;
      }
      if (s.shutting_down) {
        refuse(self, p, error_class::worker_lost, "pool " + s.cfg.name + " is shutting down");
        return p.rp;
      }
      // Refusals for the audit's sake are not audited one by one (each would
      // be one more event for the audit that is behind); telemetry counts
      // them as busy execs.
      if (!s.audit_down.empty()) {
        refuse(self, p, error_class::busy,
               s.audit_down + "; pool " + s.cfg.name + " admits no exec it could not record",
               refused_exit_code, false);
        return p.rp;
      }
      if (s.credits.exhausted()) {
        refuse(self, p, error_class::busy,
               "the audit log is falling behind; pool " + s.cfg.name +
                 " admits new requests once it catches up",
               refused_exit_code, false);
        return p.rp;
      }
      // The limit is of requests waiting beyond the workers: one a ready
      // worker takes at once never waits (a limit of 0: no waiting at all).
      if (s.queue.size() >= s.cfg.queue_limit && !has_ready_worker(s)) {
        refuse(self, p, error_class::busy,
               "pool " + s.cfg.name + " has " + std::to_string(s.queue.size()) +
                 " requests queued (limit " + std::to_string(s.cfg.queue_limit) + ")");
        return p.rp;
      }
      p.req = std::move(req);
      // The deadline counts from here, queue wait included: a caller's
      // timeout bounds when it gets its answer. It runs on the pool's ring
      // (an io_uring timeout at an absolute time) rather than a CAF timer,
      // so it fires on the event source thread with no scheduler in the way.
      p.serial = s.next_serial++;
      p.deadline = p.arrived + std::chrono::milliseconds(timeout_ms_of(self, p.req));
      s.events->arm_deadline(0, p.serial, p.deadline);
      auto rp = p.rp;
      s.queue.push_back(std::move(p));
      dispatch(self);
      return rp;
    },
    [=](status_atom) -> pool_status { return make_status(self); },
    [=](usage_atom) -> std::vector<worker_stats> { return worker_usage_now(self); },
    [=](doorbell_atom, uint64_t id) { on_doorbell(self, id); },
    [=](exited_atom, uint64_t id) { on_exited(self, id); },
    [=](syscall_denied& d) { on_policy_event(self, d.worker_id, std::move(d.event)); },
    [=](policy_warning& w) { on_policy_event(self, w.worker_id, std::move(w.event)); },
    [=](optimistic_violation& v) { on_optimistic_violation(self, v); },
    [=](deadline_atom, uint64_t, uint64_t serial) {
      // By serial: the timer was armed when the request was accepted, before
      // it had a worker.
      auto& s = self->state;
      for (auto& [id, slot] : s.workers) {
        if (!slot.current || slot.current->serial != serial)
          continue;
        terminate(self, id, slot, error_class::timeout, timeout_exit_code,
                  "deadline of " + std::to_string(timeout_ms_of(self, slot.current->req)) +
                    " ms reached");
        return;
      }
      for (auto it = s.queue.begin(); it != s.queue.end(); ++it) {
        if (it->serial == serial) {
          expire_queued(self, it);
          return;
        }
      }
      // Finished in time (its disarm was still on its way).
    },
    [=](cancel_atom, uint64_t exec_id) -> cancel_reply { return cancel(self, exec_id); },
    [=](subscribe_atom, const worker_state_listener& who) {
      auto& ls = self->state.listeners;
      if (!who || std::find(ls.begin(), ls.end(), who) != ls.end())
        return;
      ls.push_back(who);
      // Where every worker is now: a listener never waits for a transition
      // that happened before it came.
      for (const auto& [id, slot] : self->state.workers)
        self->send(who, state_event(self, id, slot, {}));
    },
    [=](unsubscribe_atom, const worker_state_listener& who) {
      auto& ls = self->state.listeners;
      ls.erase(std::remove(ls.begin(), ls.end(), who), ls.end());
    },
    [=](gauge_tick_atom) {
      auto& s = self->state;
      if (!s.cfg.telemetry)
        return;
      self->send(s.cfg.telemetry, make_status(self));
      uint32_t to_worker = 0;
      uint32_t from_worker = 0;
      for (auto& [id, slot] : s.workers) {
        if (slot.killed)
          continue;
        to_worker = std::max(to_worker, slot.ch->to_worker_used());
        from_worker = std::max(from_worker, slot.ch->to_supervisor_used());
      }
      self->send(s.cfg.telemetry, ring_fill{s.cfg.name, "to_worker", to_worker, s.cfg.ring_capacity});
      self->send(s.cfg.telemetry,
                 ring_fill{s.cfg.name, "from_worker", from_worker, s.cfg.ring_capacity});
      self->delayed_send(self, gauge_interval, gauge_tick_atom::value);
    },
    [=](audit_credit_atom, uint64_t n) {
      // From the audit actor only: anyone else could reset the count.
      if (self->current_sender() == caf::actor_cast<caf::strong_actor_ptr>(self->state.cfg.audit))
        self->state.credits.returned(n);
    },
    [=](refill_atom) {
      self->state.refill_scheduled = false;
      refill(self);
    },
    [=](policy_updated& u) { on_policy_updated(self, u); },
    // A file the policy actor refused: the revision in force stays (the
    // supervisor audits the refusal once for every pool).
    [=](const policy_rejected&) {},
    [=](shutdown_atom) {
      auto& s = self->state;
      s.shutting_down = true;
      while (!s.queue.empty()) {
        refuse(self, s.queue.front(), error_class::worker_lost, "pool " + s.cfg.name + " shut down");
        s.queue.pop_front();
      }
      for (auto& [id, slot] : s.workers)
        terminate(self, id, slot, error_class::worker_lost, refused_exit_code,
                  "pool " + s.cfg.name + " shut down");
      if (s.base.policies)
        self->send(s.base.policies, unsubscribe_atom::value, caf::actor_cast<caf::actor>(self));
      self->quit();
    },
  };
}

} // namespace

uint16_t relay_port_of(const pool_config& cfg) {
  return cfg.egress_policy && cfg.proxy ? cfg.egress_port : 0;
}

outcome<pool_config> resolve_pool_config(pool_config cfg) {
  if (cfg.worker_binary.empty() || cfg.harness.empty()) {
    auto layout = platform::find_install_layout();
    if (!layout)
      return layout.error().wrap("pool " + cfg.name);
    if (cfg.worker_binary.empty())
      cfg.worker_binary = layout->worker_binary;
    if (cfg.harness.empty())
      cfg.harness = layout->harness;
  }
  if (::access(cfg.python.c_str(), X_OK) != 0)
    return errno_failure("pool " + cfg.name + ": interpreter " + cfg.python);
  if (::access(cfg.worker_binary.c_str(), X_OK) != 0)
    return errno_failure("pool " + cfg.name + ": worker binary " + cfg.worker_binary);
  if (::access(cfg.harness.c_str(), R_OK) != 0)
    return errno_failure("pool " + cfg.name + ": harness " + cfg.harness);
  if (cfg.warm_start) {
    if (cfg.isolation != platform::isolation_mode::namespaces)
      return logic_failure("pool " + cfg.name + ": warm_start starts sandboxed workers; it "
                           "does not apply to isolation none");
    if (cfg.launcher_binary.empty())
      cfg.launcher_binary =
        cfg.worker_binary.substr(0, cfg.worker_binary.find_last_of('/') + 1) +
        "castellan-launcher";
    if (::access(cfg.launcher_binary.c_str(), X_OK) != 0)
      return errno_failure("pool " + cfg.name + ": launcher binary " + cfg.launcher_binary);
  }
  if (cfg.size == 0)
    return logic_failure("pool " + cfg.name + ": size must be at least 1");
  if (cfg.code_limit + 64 > cfg.ring_capacity)
    return logic_failure("pool " + cfg.name + ": code limit " + std::to_string(cfg.code_limit) +
                         " does not fit the ring (" + std::to_string(cfg.ring_capacity) +
                         " bytes)");
  return cfg;
}

outcome<pool_config> resolved_under(const pool_config& base,
                                    const std::shared_ptr<const policy::compiled_policy>& policy) {
  auto applied = pool_config_under(base, policy);
  if (!applied)
    return applied;
  return resolve_pool_config(std::move(*applied));
}

outcome<pool_actor> spawn_pool(caf::actor_system& sys, pool_config cfg) {
  auto base = resolve_pool_config(std::move(cfg));
  if (!base)
    return base.error();
  auto applied = resolved_under(*base, base->policy);
  if (!applied)
    return applied.error();
  // Clients get the public interface only.
  return pool_actor{sys.spawn(pool_impl, std::move(*base), std::move(*applied))};
}

} // namespace castellan
