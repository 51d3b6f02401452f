#pragma once

/// @file messages.hpp
/// castellan's one type-id block: every message type and atom that actors
/// exchange. Both peers of a cluster must register the same block
/// (`cfg.add_message_types<caf::id_block::castellan>()`), so keep additions at
/// the end of their section and never reorder.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/type_id.hpp>

#include "actors/exec_messages.hpp"
#include "actors/cancel_messages.hpp"
#include "actors/errors.hpp"
// -- per-actor message headers (policy, audit, telemetry, …) -------------------
// [messages-includes]
#include "actors/policy/policy_messages.hpp"
#include "actors/audit/audit_messages.hpp"
#include "actors/telemetry/telemetry_messages.hpp"
#include "actors/proxy/proxy_messages.hpp"
#include "actors/mediation_messages.hpp"
#include "actors/supervisor/pools_change.hpp"
#include "actors/session/session_messages.hpp"
#include "actors/session/workspace_messages.hpp"
#include "actors/session/session_files_messages.hpp"

CAF_BEGIN_TYPE_ID_BLOCK(castellan, caf::first_custom_type_id)

  // -- exec path ---------------------------------------------------------------
  CAF_ADD_TYPE_ID(castellan, (castellan::error_class))
  CAF_ADD_TYPE_ID(castellan, (castellan::exception_info))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_timing))
  CAF_ADD_TYPE_ID(castellan, (castellan::resource_usage))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_event))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_request))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_result))
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_state))
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_state_event))
  CAF_ADD_TYPE_ID(castellan, (castellan::pool_status))
  CAF_ADD_TYPE_ID(castellan, (std::vector<castellan::pool_status>))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_output))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_file_in))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_file_out))

  CAF_ADD_ATOM(castellan, castellan, exec_atom, "exec")
  CAF_ADD_ATOM(castellan, castellan, cancel_atom, "cancel")
  CAF_ADD_ATOM(castellan, castellan, status_atom, "status")
  CAF_ADD_ATOM(castellan, castellan, subscribe_atom, "subscribe")
  CAF_ADD_ATOM(castellan, castellan, unsubscribe_atom, "unsubscr")
  CAF_ADD_ATOM(castellan, castellan, doorbell_atom, "doorbell")
  CAF_ADD_ATOM(castellan, castellan, exited_atom, "exited")
  CAF_ADD_ATOM(castellan, castellan, shutdown_atom, "shutdown")
  CAF_ADD_ATOM(castellan, castellan, refill_atom, "refill")
  CAF_ADD_ATOM(castellan, castellan, deadline_atom, "deadline")
  CAF_ADD_ATOM(castellan, castellan, get_pool_atom, "get_pool")
  CAF_ADD_ATOM(castellan, castellan, gauge_tick_atom, "gauge_tick")
  CAF_ADD_ATOM(castellan, castellan, exec_output_atom, "exec_out")

  // -- policy (actors/policy) --------------------------------------------------
  // [messages-policy]
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_snapshot))
  CAF_ADD_TYPE_ID(castellan, (castellan::fs_check))
  CAF_ADD_TYPE_ID(castellan, (castellan::net_check))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_check))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_decision))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_rejected))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_updated))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_status))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_file_event))
  CAF_ADD_ATOM(castellan, castellan, policy_get_atom, "pol_get")
  CAF_ADD_ATOM(castellan, castellan, policy_list_atom, "pol_list")
  CAF_ADD_ATOM(castellan, castellan, policy_put_atom, "pol_put")
  CAF_ADD_ATOM(castellan, castellan, policy_reload_atom, "pol_reload")

  // -- audit (actors/audit) ----------------------------------------------------
  // [messages-audit]
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_started))
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_finished))
  CAF_ADD_TYPE_ID(castellan, (castellan::security_event))
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_lost_event))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_rejection))
  CAF_ADD_TYPE_ID(castellan, (castellan::connection_record))
  CAF_ADD_TYPE_ID(castellan, (castellan::audit_config))
  CAF_ADD_TYPE_ID(castellan, (castellan::audit_filter))
  CAF_ADD_TYPE_ID(castellan, (castellan::audit_entry))
  CAF_ADD_TYPE_ID(castellan, (castellan::audit_stats))
  CAF_ADD_ATOM(castellan, castellan, audit_flush_atom, "aflush")
  CAF_ADD_ATOM(castellan, castellan, audit_tick_atom, "atick")
  CAF_ADD_ATOM(castellan, castellan, audit_join_atom, "ajoin")
  CAF_ADD_ATOM(castellan, castellan, audit_credit_atom, "acredit")
  CAF_ADD_ATOM(castellan, castellan, audit_release_atom, "arelease")

  // -- telemetry (actors/telemetry) ---------------------------------------------
  // [messages-telemetry]
  CAF_ADD_TYPE_ID(castellan, (castellan::exec_observation))
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_usage))
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_retired))
  CAF_ADD_TYPE_ID(castellan, (castellan::counter_increment))
  CAF_ADD_TYPE_ID(castellan, (castellan::mediated_syscall))
  CAF_ADD_TYPE_ID(castellan, (castellan::ring_fill))
  CAF_ADD_ATOM(castellan, castellan, metrics_atom, "metrics")
  CAF_ADD_ATOM(castellan, castellan, summary_atom, "summary")

  // -- cancel (actors/cancel_messages.hpp) --------------------------------------
  // [messages-cancel]
  CAF_ADD_TYPE_ID(castellan, (castellan::cancel_outcome))
  CAF_ADD_TYPE_ID(castellan, (castellan::cancel_reply))

  // -- egress proxy (actors/proxy) -----------------------------------------------
  // [messages-proxy]
  CAF_ADD_TYPE_ID(castellan, (castellan::egress_link))
  CAF_ADD_TYPE_ID(castellan, (castellan::egress_status))
  CAF_ADD_ATOM(castellan, castellan, egress_detach_atom, "eg_detach")
  // -- seccomp user notification (actors/mediation_messages.hpp) ---------------
  // [messages-mediation]
  CAF_ADD_TYPE_ID(castellan, (castellan::syscall_denied))
  CAF_ADD_TYPE_ID(castellan, (castellan::policy_warning))
  CAF_ADD_TYPE_ID(castellan, (castellan::optimistic_violation))
  // -- request policies (actors/supervisor) -------------------------------------
  // [messages-policy-pools]
  CAF_ADD_ATOM(castellan, castellan, pool_idle_atom, "pool_idle")
  // -- the telemetry summary as numbers (actors/telemetry) ------------------------
  // [messages-telemetry-summary]
  CAF_ADD_TYPE_ID(castellan, (castellan::latency_quantiles))
  CAF_ADD_TYPE_ID(castellan, (castellan::telemetry_summary))
  CAF_ADD_ATOM(castellan, castellan, summary_data_atom, "sum_data")
  // -- reconfiguring the pools (actors/supervisor) -------------------------------
  CAF_ADD_ATOM(castellan, castellan, reconfigure_atom, "reconfig")
  CAF_ADD_TYPE_ID(castellan, (castellan::pools_change))
  // -- the live audit over HTTP (actors/api/audit_stream.hpp) -------------------
  CAF_ADD_ATOM(castellan, castellan, get_audit_atom, "get_audit")
  CAF_ADD_ATOM(castellan, castellan, history_atom, "history")
  CAF_ADD_ATOM(castellan, castellan, written_atom, "written")
  CAF_ADD_ATOM(castellan, castellan, heartbeat_atom, "heartbeat")
  // -- a pool's workers and their cgroups (actors/pool) -------------------------
  CAF_ADD_TYPE_ID(castellan, (castellan::worker_stats))
  CAF_ADD_TYPE_ID(castellan, (std::vector<castellan::worker_stats>))
  CAF_ADD_ATOM(castellan, castellan, usage_atom, "usage")
  // -- sessions (actors/session) ------------------------------------------------
  CAF_ADD_TYPE_ID(castellan, (castellan::session_record))
  CAF_ADD_TYPE_ID(castellan, (castellan::session_options))
  CAF_ADD_TYPE_ID(castellan, (castellan::session_state))
  CAF_ADD_TYPE_ID(castellan, (castellan::session_info))
  CAF_ADD_TYPE_ID(castellan, (std::vector<castellan::session_info>))
  CAF_ADD_TYPE_ID(castellan, (castellan::session_stats))
  CAF_ADD_ATOM(castellan, castellan, session_create_atom, "s_create")
  CAF_ADD_ATOM(castellan, castellan, session_get_atom, "s_get")
  CAF_ADD_ATOM(castellan, castellan, session_list_atom, "s_list")
  CAF_ADD_ATOM(castellan, castellan, session_tick_atom, "s_tick")
  CAF_ADD_ATOM(castellan, castellan, ready_atom, "ready")
  CAF_ADD_ATOM(castellan, castellan, destroy_atom, "destroy")
  // -- owners and workspaces of sessions (actors/session) -----------------------
  CAF_ADD_TYPE_ID(castellan, (castellan::session_ref))
  CAF_ADD_TYPE_ID(castellan, (castellan::workspace_info))
  CAF_ADD_TYPE_ID(castellan, (std::vector<castellan::workspace_info>))
  CAF_ADD_ATOM(castellan, castellan, workspace_create_atom, "ws_create")
  CAF_ADD_ATOM(castellan, castellan, workspace_list_atom, "ws_list")
  CAF_ADD_ATOM(castellan, castellan, workspace_remove_atom, "ws_remove")

  // -- a session's files (actors/session/session_files.hpp) --------------------
  CAF_ADD_TYPE_ID(castellan, (castellan::files_op))
  CAF_ADD_TYPE_ID(castellan, (castellan::files_request))
  CAF_ADD_TYPE_ID(castellan, (castellan::files_entry))
  CAF_ADD_TYPE_ID(castellan, (castellan::files_reply))
  CAF_ADD_TYPE_ID(castellan, (castellan::download_ticket))
  CAF_ADD_ATOM(castellan, castellan, files_atom, "files")
  CAF_ADD_ATOM(castellan, castellan, files_download_atom, "f_download")
  CAF_ADD_ATOM(castellan, castellan, files_read_atom, "f_read")

CAF_END_TYPE_ID_BLOCK(castellan)
