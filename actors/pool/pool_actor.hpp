#pragma once

/// @file pool_actor.hpp
/// The pool: a set of warm workers behind one typed interface. It owns their
/// shared-memory segments and one io_uring ring (through its event source),
/// hands each request to an idle worker, queues with a bound and answers
/// `busy` when full, enforces the deadline, and replaces workers that die.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/audit/audit_actor.hpp"
#include "actors/messages.hpp"
#include "actors/telemetry/telemetry_actor.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/policy_actor.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/proxy/proxy_actor.hpp"
#include "ipc/result.hpp"
#include "platform/worker_spec.hpp"

namespace castellan {

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
  // Cancels exec `exec_id`: kills its worker if it runs, drops it if it is
  // queued; a no-op answer for one that finished or is unknown.
  caf::replies_to<cancel_atom, uint64_t>::with<cancel_reply>,
  // Stop every worker and quit.
  caf::reacts_to<shutdown_atom>>;

/// Who hears about a pool's worker state transitions (the supervisor).
using worker_state_listener = caf::typed_actor<caf::reacts_to<worker_state_event>>;

/// How a pool's workers run each exec (both stateless: sessions that keep
/// state on purpose are another feature).
enum class exec_mode : uint8_t {
  isolated, ///< the default: a warm, pre-imported zygote forks a fresh child per
            ///< exec, in a Landlock domain of its own, and puts /tmp, /dev/shm and
            ///< IPC back after it (docs/security.md: what execs still share)
  shared,   ///< the warm interpreter itself runs each exec in a fresh globals
            ///< namespace: fastest, but execs share the interpreter's state, so
            ///< only for a pool whose requesters are one trust domain
};

/// "isolated" / "shared".
const char* to_string(exec_mode m) noexcept;
/// Parses "isolated" / "shared"; false if neither.
bool from_string(std::string_view text, exec_mode& out) noexcept;

/// How a pool is set up. The defaults are what `castellan exec` uses.
struct pool_config {
  std::string name = "default";
  uint32_t size = 4;           ///< warm workers kept
  uint32_t queue_limit = 256;  ///< queued requests beyond which `busy` is answered
  std::string python = "/usr/bin/python3";
  std::string worker_binary;   ///< castellan-worker (empty: find_install_layout)
  std::string harness;         ///< castellan_harness.py (empty: find_install_layout)
  /// Sandboxed workers start warm: cloned by the pool's launcher
  /// (castellan-launcher, an interpreter with the harness loaded) into their
  /// new sandbox, instead of exec'ing castellan-worker and then Python. The
  /// sandbox is the same; the workers of the pool share the launcher's
  /// address-space layout and str hash secret (platform/linux/worker_launcher.hpp).
  bool warm_start = false;
  std::string launcher_binary; ///< castellan-launcher (empty: beside worker_binary)
  uint32_t ring_capacity = 1u << 20; ///< bytes per direction
  uint64_t stdout_limit = 4u << 20;  ///< bytes kept; the rest is dropped and flagged
  uint64_t stderr_limit = 4u << 20;
  uint64_t code_limit = 512u << 10;  ///< larger code is refused (limit_exceeded)
  uint64_t default_timeout_ms = 30000;
  uint32_t recycle_after = 0;        ///< execs per worker before replacement (0: never)
  exec_mode mode = exec_mode::isolated; ///< how each exec runs in a worker
  bool worker_stderr = false;        ///< pass workers' own diagnostics to our stderr
  /// How workers are isolated: the Linux sandbox (namespaces, root, Landlock,
  /// seccomp, a cgroup per worker) by default; `none` (plain processes) only
  /// for the portable backend and development.
  platform::isolation_mode isolation = platform::isolation_mode::namespaces;
  /// Per-worker cgroup limits (0 = that one unlimited); sandboxed workers only.
  platform::resource_limits limits{256ull << 20, 32, 100};
  /// What the sandbox contains and enforces (from the policy).
  sandbox_profile sandbox;
  worker_state_listener listener;    ///< receives worker_state_event (may be null)
  std::string policy_name = "default"; ///< names the policy in audit records
  /// Receives exec_started/exec_finished/security/worker_lost records (may be
  /// null: nothing is audited). While `audit_backlog` says the audit backlog
  /// is saturated, new requests are answered `busy` rather than letting the
  /// audit mailbox grow without bound.
  audit_actor audit;
  std::shared_ptr<castellan::audit_pressure> audit_backlog;
  telemetry_actor telemetry; ///< receives observations and gauges (may be null)

  // -- egress (actors/proxy) ---------------------------------------------------
  /// The policy the egress proxy decides this pool's connections with; null
  /// when the policy allows no network (the sandbox then has loopback only).
  std::shared_ptr<const policy::compiled_policy> egress_policy;
  /// The proxy (set by the supervisor). With an egress policy and a proxy,
  /// every sandboxed worker gets the egress relay on 127.0.0.1:egress_port.
  proxy_actor proxy;
  uint16_t egress_port = 3128;
  /// The policy the event source decides seccomp notifications with, when
  /// `sandbox.notify` lists system calls (apply_policy sets both).
  std::shared_ptr<const policy::compiled_policy> mediation_policy;
  /// Events kept in one exec's result; beyond it they go to audit only.
  uint32_t events_limit = 256;

  // -- the pool's policy (actors/policy) ---------------------------------------
  /// The policy spawn_pool applies over the rest of this config (apply_policy),
  /// and the pool again over the same config at each reload announced by
  /// `policies`. Null: the config is used as given (a caller that applied a
  /// policy itself, or a pool without one).
  std::shared_ptr<const policy::compiled_policy> policy;
  /// Announces reloads of `policy` (by its name). The pool applies each newer
  /// revision to the workers it starts from then on; a worker running an exec
  /// finishes it under the policy it started with and is then replaced. A
  /// revision the pool cannot apply keeps the one in force and is audited as
  /// policy_rejected. Null: the policy never changes.
  policy_actor policies;
  /// The name of a policy of the supervisor's policy directory
  /// (supervisor_config::policies): the supervisor sets `policy` and
  /// `policies` from it. Empty: none.
  std::string named_policy;
};

/// The port of the egress relay every sandboxed worker of `cfg` gets
/// (127.0.0.1:egress_port, given an egress policy and a proxy), 0: none.
uint16_t relay_port_of(const pool_config& cfg);

/// Fills in the worker binary and harness from the install layout when they
/// are empty, and checks every file and number the pool depends on.
outcome<pool_config> resolve_pool_config(pool_config cfg);

/// `base` with `policy` applied over it (apply_policy), named after the policy
/// (`policy_name`); `base` as given when `policy` is null.
outcome<pool_config> pool_config_under(const pool_config& base,
                                       const std::shared_ptr<const policy::compiled_policy>& policy);

/// Spawns a pool after checking that its worker binary, harness and
/// interpreter exist. Its workers start in the background; requests that
/// arrive before one is ready are queued.
outcome<pool_actor> spawn_pool(caf::actor_system& sys, pool_config cfg);

} // namespace castellan
