#pragma once

/// @file pool_actor.hpp
/// The pool: a set of warm workers behind one typed interface. It owns their
/// shared-memory segments and one io_uring ring (through its event source),
/// hands each request to an idle worker, queues with a bound and answers
/// `busy` when full, enforces the deadline, and replaces workers that die.

#include <cstdint>
#include <memory>
#include <string>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/audit/audit_actor.hpp"
#include "actors/messages.hpp"
#include "actors/telemetry/telemetry_actor.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/policy_actor.hpp"
#include "actors/pool/pool_spec.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/proxy/proxy_actor.hpp"
#include "ipc/outcome.hpp"
#include "platform/worker_spec.hpp"

namespace castellan {

/// Who hears about a pool's worker state transitions (the supervisor).
using worker_state_listener = caf::typed_actor<caf::reacts_to<worker_state_event>>;

/// What a pool's clients may send it: the handle spawn_pool and the
/// supervisor's get_pool hand out. What the pool's own parts send it (kernel
/// events from its event source, its timers) is in pool_internal_actor
/// (pool_internal.hpp), which only the pool holds: a client could otherwise
/// forge a worker's exit or a decided call.
using pool_actor = caf::typed_actor<
  // Runs one request on a warm worker.
  caf::replies_to<exec_atom, exec_request>::with<exec_result>,
  // Occupancy and counters.
  caf::replies_to<status_atom>::with<pool_status>,
  // Each live worker and its cgroup's accounting now.
  caf::replies_to<usage_atom>::with<std::vector<worker_stats>>,
  // Cancels exec `exec_id`: kills its worker if it runs, drops it if it is
  // queued; a no-op answer for one that finished or is unknown.
  caf::replies_to<cancel_atom, uint64_t>::with<cancel_reply>,
  // The listener receives the state of every worker now, then each
  // transition (until it unsubscribes). With no listener the pool sends no
  // state events at all.
  caf::reacts_to<subscribe_atom, worker_state_listener>,
  caf::reacts_to<unsubscribe_atom, worker_state_listener>,
  // Stop every worker and quit.
  caf::reacts_to<shutdown_atom>>;

/// A pool's spec (pool_spec.hpp: what it is, as data) with the handles a
/// running pool talks to and what the supervisor derives from its policy.
/// Every field of the spec reads as before (`cfg.size`, `cfg.sandbox`); only
/// the spec crosses nodes.
struct pool_config : pool_spec {
  pool_config() = default;
  explicit pool_config(pool_spec spec) : pool_spec(std::move(spec)) {}

  /// The description alone.
  const pool_spec& spec() const noexcept { return *this; }

  worker_state_listener listener;    ///< subscribed from the start (may be null)
  /// Receives exec_started/exec_finished/security/worker_lost records (may be
  /// null: nothing is audited). The pool joins its flow control: while the
  /// audit holds back the pool's credits (audit_credits.hpp), new requests
  /// are answered `busy` rather than letting the audit mailbox grow without
  /// bound.
  audit_actor audit;
  telemetry_actor telemetry; ///< receives observations and gauges (may be null)

  // -- egress (actors/proxy) ---------------------------------------------------
  /// The policy the egress proxy decides this pool's connections with; null
  /// when the policy allows no network (the sandbox then has loopback only).
  /// Derived by apply_policy.
  std::shared_ptr<const policy::compiled_policy> egress_policy;
  /// The proxy (set by the supervisor). With an egress policy and a proxy,
  /// every sandboxed worker gets the egress relay on 127.0.0.1:egress_port.
  proxy_actor proxy;
  /// The policy the event source decides seccomp notifications with, when
  /// `sandbox.notify` lists system calls (apply_policy sets both).
  std::shared_ptr<const policy::compiled_policy> mediation_policy;

  // -- the pool's policy (actors/policy) ---------------------------------------
  /// Announces reloads of `policy` (by its name). The pool applies each newer
  /// revision to the workers it starts from then on; a worker running an exec
  /// finishes it under the policy it started with and is then replaced. A
  /// revision the pool cannot apply keeps the one in force and is audited as
  /// policy_rejected. Null: the policy never changes.
  policy_actor policies;
};

/// The port of the egress relay every sandboxed worker of `cfg` gets
/// (127.0.0.1:egress_port, given an egress policy and a proxy), 0: none.
uint16_t relay_port_of(const pool_config& cfg);

/// Fills in the worker binary and harness from the install layout when they
/// are empty, and checks every file and number the pool depends on.
outcome<pool_config> resolve_pool_config(pool_config cfg);

/// `base` under `policy` (pool_config_under), checked as resolve_pool_config
/// checks a pool: what a pool runs when it applies that policy.
outcome<pool_config> resolved_under(const pool_config& base,
                                    const std::shared_ptr<const policy::compiled_policy>& policy);

/// Spawns a pool after checking that its worker binary, harness and
/// interpreter exist. Its workers start in the background; requests that
/// arrive before one is ready are queued.
outcome<pool_actor> spawn_pool(caf::actor_system& sys, pool_config cfg);

} // namespace castellan
