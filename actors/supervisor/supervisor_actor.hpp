#pragma once

/// @file supervisor_actor.hpp
/// The front door: owns the pools, routes `exec` to them, restarts a pool that
/// crashes, and publishes worker state events to its subscribers.

#include <optional>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"
#include "actors/audit/audit_actor.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/proxy/proxy_actor.hpp"
#include "actors/session/session_actor.hpp"
#include "actors/session/session_limits.hpp"
#include "actors/session/workspace_config.hpp"
#include "actors/supervisor/request_policy.hpp"
#include "actors/telemetry/telemetry_actor.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// What clients may send the supervisor (spawn_supervisor's handle). What
/// only its pools and its own timers send is in supervisor_internal_actor.
using supervisor_actor = caf::typed_actor<
  // Runs a request on the pool it names (the first pool when it names none),
  // or, with a request policy, where that policy is enforced.
  caf::replies_to<exec_atom, exec_request>::with<exec_result>,
  // Cancels a running or queued exec on the pool that has it; a no-op answer
  // (already_finished / unknown) otherwise, never an error.
  caf::replies_to<cancel_atom, uint64_t>::with<cancel_reply>,
  // The status of every pool.
  caf::replies_to<status_atom>::with<std::vector<pool_status>>,
  // The pool of that name, for callers that want to skip the routing hop.
  caf::replies_to<get_pool_atom, std::string>::with<pool_actor>,
  // The listener receives every worker_state_event from now on (until it
  // is down or unsubscribes); the first one also the state each worker is
  // in. Pools make no state events while nobody listens.
  caf::reacts_to<subscribe_atom, worker_state_listener>,
  caf::reacts_to<unsubscribe_atom, worker_state_listener>,
  // Prometheus text exposition of every metric.
  caf::replies_to<metrics_atom>::with<std::string>,
  // A few lines for humans.
  caf::replies_to<summary_atom>::with<std::string>,
  // Their figures as numbers.
  caf::replies_to<summary_data_atom>::with<telemetry_summary>,
  // Waits until every audit record so far is written (and synced).
  caf::replies_to<audit_flush_atom>::with<audit_stats>,
  // The audit actor, for a live subscriber (GET /v1/audit); a null handle
  // when nothing is audited.
  caf::replies_to<get_audit_atom>::with<audit_actor>,
  // Makes the configured pools these (supervisor_config::pools, the first
  // the default route): new names are started, names gone stop admitting
  // and are stopped once their execs in flight are answered, a pool whose
  // settings changed is replaced the same way (a change of `size` alone is
  // reported as resized). Every new pool is checked and started before
  // anything else changes: a failure refuses the whole change (an error)
  // and leaves the pools as they were. A pool that names a policy of the
  // policy directory can be kept, not added or changed.
  caf::replies_to<reconfigure_atom, std::vector<pool_config>>::with<pools_change>,
  // -- sessions (actors/session, docs/sessions.md) ------------------------------
  // Creates a session from the configuration of the pool options.pool names
  // (the default pool when empty; not a request policy's pool) and answers
  // once its worker is ready. `busy` (castellan_errc::busy) when
  // sessions.max_sessions exist, or the owner holds sessions.max_per_owner;
  // a session counts from its create until its worker and cgroup are gone.
  // options.workspace names a workspace of the store (`no_such_workspace`,
  // `workspaces_disabled` without a store); the session holds a lease on it
  // until its worker is gone.
  caf::replies_to<session_create_atom, session_options>::with<session_info>,
  // By-id messages name the session and the caller's owner (session_ref):
  // a session of another owner is answered `no_such_session`, as one that
  // does not exist is.
  // The session's handle.
  caf::replies_to<session_get_atom, session_ref>::with<session_actor>,
  // Every session that counts against the limits (starting, running,
  // ended, being destroyed), in the order of their ids: for the operator.
  caf::replies_to<session_list_atom>::with<std::vector<session_info>>,
  // The sessions of that owner, in the order of their ids.
  caf::replies_to<session_list_atom, std::string>::with<std::vector<session_info>>,
  // The same as sending these to the session (for the API).
  caf::replies_to<exec_atom, session_ref, exec_request>::with<exec_result>,
  caf::replies_to<status_atom, session_ref>::with<session_stats>,
  // A files operation on the session's workspace, and the start of a
  // download from it (session_actor, session_files.hpp).
  caf::replies_to<files_atom, session_ref, files_request>::with<files_reply>,
  caf::replies_to<files_download_atom, session_ref, std::string>::with<download_ticket>,
  // Destroys the session: its worker and cgroup are gone and its workspace
  // lease released when this answers, and it no longer counts against the
  // limits.
  caf::replies_to<destroy_atom, session_ref>::with<session_stats>,
  // -- workspaces (actors/session/workspace_store.hpp, docs/workspaces.md) -------
  // Each is answered `workspaces_disabled` when the supervisor has no store
  // (supervisor_config::workspaces). The store's work (mke2fs, fallocate,
  // mount, unlink) runs on a thread of its own, never in the supervisor.
  // Creates a workspace: a name (workspace_name.hpp; `invalid_request`
  // otherwise) and a quota in bytes (0: workspaces.default_quota_bytes;
  // above workspaces.max_quota_bytes: `invalid_request`). `workspace_exists`
  // for a name taken, `busy` at a cap of the store, `no_space` when the
  // host's disk cannot hold the quota.
  caf::replies_to<workspace_create_atom, std::string, uint64_t>::with<workspace_info>,
  // Every workspace of the store, by name.
  caf::replies_to<workspace_list_atom>::with<std::vector<workspace_info>>,
  // Removes a workspace and its files, answering it as it was last:
  // `workspace_in_use` while a session holds it, `no_such_workspace`.
  caf::replies_to<workspace_remove_atom, std::string>::with<workspace_info>,
  // Stop every pool and session, flush the audit log and quit.
  caf::reacts_to<shutdown_atom>>;

/// The supervisor's whole interface: the public one plus what its pools and
/// its own timers send it. Pools get it as their worker_state_listener only.
using supervisor_internal_actor = supervisor_actor::extend<
  // From the pools: a worker changed state.
  caf::reacts_to<worker_state_event>,
  // From the supervisor itself: the policy pool `name` may have been idle
  // since its use number `generation` (stopped if so).
  caf::reacts_to<pool_idle_atom, std::string, uint64_t>,
  // From its policy actor: a policy file was (re)loaded, or refused (audited
  // here, once; the pools that follow it keep the revision in force).
  caf::reacts_to<policy_updated>, caf::reacts_to<policy_rejected>>;

struct supervisor_config {
  /// The pools to run; the first one is the default route. Names must be
  /// unique and non-empty.
  std::vector<pool_config> pools;
  /// Where audit records go; no audit actor runs when this is empty.
  std::optional<audit_config> audit;
  /// The egress proxy's limits. The proxy runs when any pool has an egress
  /// policy (its policy allows network); its pools' workers then reach it
  /// through their egress relay.
  proxy::egress_limits egress;
  /// Requests that bring their own policy (`exec_request::policy`): what
  /// such a policy may ask for, and the pools started for them from the
  /// default pool's settings (docs/policies.md, "Request policies").
  policy_pool_config policy_pools;
  /// The policy directory the supervisor's policy actor serves: a pool that
  /// names one of its policies (pool_config::named_policy) runs under it and
  /// follows its reloads (with `watch`, as the files change). Without it, no
  /// pool may name a policy.
  std::optional<policy_config> policies;
  /// How many sessions may exist, and for how long.
  session_limits sessions;
  /// The workspace store, opened by spawn_supervisor (which fails when it
  /// cannot be: it needs root); without it, workspace messages and a
  /// session that names a workspace are answered `workspaces_disabled`.
  std::optional<workspace_config> workspaces;
};

/// Checks the configuration (and each pool's files) and spawns the supervisor
/// with its pools.
outcome<supervisor_actor> spawn_supervisor(caf::actor_system& sys, supervisor_config cfg);

} // namespace castellan
