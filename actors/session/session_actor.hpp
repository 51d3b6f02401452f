#pragma once

/// @file session_actor.hpp
/// A session: one client's sandbox across calls. Its actor owns a dedicated
/// worker (a pool of one, in the session exec mode: one __main__, the
/// environment and working directory kept from exec to exec), runs the
/// client's execs and commands there one after the other, reports the
/// worker's cgroup accounting, ends the session when the worker dies, reaps
/// it after its idle TTL or maximum lifetime, and frees everything on
/// destroy. The supervisor creates, finds and lists sessions
/// (supervisor_actor.hpp); docs/sessions.md says what a session keeps.

#include <string>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/audit/audit_actor.hpp"
#include "actors/messages.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/session/workspace_store.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// What a session's clients may send it (spawn_session's handle, and the
/// supervisor's answer to `session_get_atom`). What its pool and its reaper
/// timer send it is in session_internal_actor (session_internal.hpp).
using session_actor = caf::typed_actor<
  // Runs code, or with argv a command, in the session's worker, after the
  // execs before it: the same globals, environment and working directory.
  // A request policy is refused (a session runs under its pool's policy).
  // An exec that kills the worker (timeout, cancelled, oom, policy_kill,
  // worker_lost) is answered as such and ends the session; later requests
  // get `session_ended`.
  caf::replies_to<exec_atom, exec_request>::with<exec_result>,
  // Cancels exec `exec_id` of this session (which kills the worker, and so
  // ends the session, when it runs).
  caf::replies_to<cancel_atom, uint64_t>::with<cancel_reply>,
  // Its state and its worker's cgroup accounting now.
  caf::replies_to<status_atom>::with<session_stats>,
  // Answers once the worker is ready (at once when it is); an error when
  // the worker could not start or the session ended.
  caf::replies_to<ready_atom>::with<session_info>,
  // Stops the worker, answers once the worker and its cgroup are gone (the
  // final stats), and quits.
  caf::replies_to<destroy_atom>::with<session_stats>,
  // A files operation on the session's workspace (session_files.hpp): run
  // on a thread of its own, while the session is idle or an exec runs, and
  // after the session ended (its workspace is still there) until it is
  // destroyed. `invalid_request` without a workspace; `busy` while
  // max_files_jobs operations of the session run.
  caf::replies_to<files_atom, files_request>::with<files_reply>,
  // Opens a file of the workspace for download: its entry, and the actor
  // that reads it out (files_read_atom, chunk by chunk).
  caf::replies_to<files_download_atom, std::string>::with<download_ticket>>;

/// What spawn_session needs: the session as listed, the pool its worker
/// runs in (session_worker_config), and the audit actor (may be null).
struct session_config {
  session_info info;
  pool_config worker;
  audit_actor audit;
};

/// The pool of one session's worker, from the configuration of the pool it
/// is created from: one worker in the session exec mode, never recycled,
/// started cold (no launcher of its own), the workspace bound at /workspace,
/// and the policy the base pool is under now (a session does not follow
/// reloads: its worker is not replaced under it). The workspace is bound from
/// the lease's own fd of its mount (sandbox_profile::workspace_root), never
/// from a path. Named by the session id,
/// which audit records of its execs then carry as their pool.
/// `workspace` is the lease the session's workspace (info.workspace) is
/// bound from; null when it has none.
pool_config session_worker_config(const pool_config& base, const session_info& info,
                                  const workspace_lease* workspace);

/// Spawns the session and its pool; the worker starts in the background
/// (`ready_atom` waits for it). Fails when the pool cannot be started.
outcome<session_actor> spawn_session(caf::actor_system& sys, session_config cfg);

} // namespace castellan
