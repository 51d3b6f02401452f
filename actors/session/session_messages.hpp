#pragma once

/// @file session_messages.hpp
/// The messages of sessions (actors/session): what a client asks a session
/// to be, what the supervisor lists, and what a session reports about
/// itself. Plain structs with `inspect()`, so they cross nodes.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/meta/type_name.hpp>

#include "actors/exec_messages.hpp"

namespace castellan {

/// What a client asks for when it creates a session.
struct session_options {
  /// The pool whose configuration (policy, limits, interpreter) the session's
  /// worker starts from; empty: the default pool.
  std::string pool;
  /// Who holds the session: the per-owner limit counts by it (the API passes
  /// its token's name). Empty is an owner like any other.
  std::string owner;
  /// The name of a workspace of the supervisor's store (workspace_name.hpp)
  /// bound writable at /workspace, which is then the session's first
  /// working directory; empty: none. The session holds a lease on it for
  /// its whole life: the workspace cannot be removed meanwhile.
  std::string workspace;
  /// The session is ended after this long without an exec, counted from
  /// its last answer or from when it became ready (0: the supervisor's
  /// default; never above its maximum).
  uint64_t idle_ttl_ms = 0;
  /// The session is ended this long after it became ready, whatever it
  /// does (0: the supervisor's default; never above its maximum).
  uint64_t max_lifetime_ms = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_options& x) {
  return f(caf::meta::type_name("session_options"), x.pool, x.owner, x.workspace,
           x.idle_ttl_ms, x.max_lifetime_ms);
}

/// Where a session is in its life.
enum class session_state : uint8_t {
  starting, ///< its worker is starting
  ready,    ///< its worker is idle
  running,  ///< an exec runs (more may wait in its queue)
  ended,    ///< its worker is gone (killed, crashed): it only answers session_ended
};

/// "starting", "ready", "running", "ended".
std::string to_string(session_state x);

/// A session as the supervisor lists it.
struct session_info {
  std::string id;        ///< "s-" and 16 hex digits
  std::string owner;
  std::string pool;      ///< the pool it was created from
  std::string workspace; ///< the name of the workspace at /workspace; empty: none
  int64_t created_ns = 0; ///< CLOCK_REALTIME
  uint64_t idle_ttl_ms = 0;     ///< in force (the default or the client's)
  uint64_t max_lifetime_ms = 0; ///< in force
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_info& x) {
  return f(caf::meta::type_name("session_info"), x.id, x.owner, x.pool, x.workspace,
           x.created_ns, x.idle_ttl_ms, x.max_lifetime_ms);
}

/// Which session a client means, and who asks: the supervisor's by-id
/// session messages answer `no_such_session` when `owner` is not the
/// session's owner (session_options::owner), exactly as for an id that does
/// not exist, so that a client learns nothing of others' sessions. The API
/// passes its token's name (empty when the daemon runs without tokens: the
/// owner every session then has).
struct session_ref {
  std::string id;
  std::string owner;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_ref& x) {
  return f(caf::meta::type_name("session_ref"), x.id, x.owner);
}

/// A session's state and its worker's cgroup accounting at one instant.
struct session_stats {
  session_info info;
  session_state state = session_state::starting;
  /// Why it ended (state `ended`, or the final stats of a destroyed one).
  std::string end_reason;
  uint64_t execs = 0;   ///< execs answered
  uint64_t idle_ms = 0; ///< since its last exec was answered (or it became ready)
  uint64_t age_ms = 0;  ///< since it became ready
  /// Its worker now (zeros once it ended): pid, CPU, memory, tasks.
  worker_stats worker;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, session_stats& x) {
  return f(caf::meta::type_name("session_stats"), x.info, x.state, x.end_reason, x.execs,
           x.idle_ms, x.age_ms, x.worker);
}

} // namespace castellan
