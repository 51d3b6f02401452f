#pragma once

/// @file api_actor.hpp
/// The actor between the HTTP server's I/O thread and the supervisor. The
/// I/O thread hands it each admitted request with `anon_send` (tagged with
/// the server's request id); it asks the supervisor without ever waiting
/// for the answer, and passes the HTTP response to its responder, which
/// writes it on the I/O thread. Its messages are made of castellan's
/// registered types only:
///
///   (exec_atom, uint64_t request_id, exec_request, std::string id)
///                                                   → POST /v1/exec, /v1/run; streamed
///                                                     when the request's output_sink
///                                                     is this actor
///   (exec_atom, uint64_t request_id, session_ref session, exec_request, std::string id)
///                                                   → POST /v1/sessions/{id}/exec, /run
///   (exec_output_atom, exec_output)                 ← a piece of a streamed exec's output
///   (status_atom, uint64_t request_id)              → GET /v1/pools
///   (status_atom, uint64_t request_id, std::set<std::string> visible)
///                                                   → GET /v1/pools, those pools only
///   (status_atom, uint64_t request_id, bool draining, uint64_t uptime_ms,
///    uint64_t in_flight, uint64_t connections)      → GET /v1/status
///   (metrics_atom, uint64_t request_id)             → GET /metrics
///   (cancel_atom, uint64_t exec_id)                 → cancel that exec (no answer)
///   (cancel_atom, uint64_t request_id, uint64_t exec_id, std::string id)
///                                                   → DELETE /v1/execs/{id}
///   (cancel_atom, uint64_t exec_id, session_ref session)
///   (cancel_atom, uint64_t request_id, uint64_t exec_id, std::string id, session_ref session)
///                                                   → the same for an exec in a session
///   and the session routes' messages (session_routes.hpp)

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/api/http_server.hpp"
#include "actors/api/policy_scope.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

namespace castellan::api {

/// Where the actor's answers go. Called from CAF scheduler threads: must
/// not block.
class api_responder {
public:
  virtual ~api_responder() = default;
  virtual void complete(uint64_t request_id, http_response response) = 0;
  /// A piece of a streamed answer (200, text/event-stream; its head goes
  /// with the first piece).
  virtual void stream(uint64_t request_id, std::string bytes) = 0;
  /// The last piece of a streamed answer: the request is over.
  virtual void finish_stream(uint64_t request_id, std::string bytes) = 0;
  /// The supervisor listed every session (session_registry::replace).
  virtual void sessions_listed(const std::vector<session_info>& live) = 0;
  /// The supervisor knows the session no more (session_registry::erase).
  virtual void session_gone(const std::string& id) = 0;
};

/// A supervisor's refusal as an HTTP error (docs/api.md, "Errors").
http_response supervisor_error(const caf::error& err, const caf::actor_system& sys);

/// Whether `err` is castellan_errc::no_such_session.
bool is_no_such_session(const caf::error& err);

caf::actor spawn_api_actor(caf::actor_system& sys, supervisor_actor supervisor,
                           std::shared_ptr<api_responder> responder);

/// The policy routes' work (policy_routes.hpp) on an actor of its own, which
/// answers `request_id` through `responder` and quits: CPU-bound and
/// reading the policy directory, it belongs on neither the I/O thread nor
/// the api actor, whose results it would hold up. `scope`: the policies
/// of `policy_dir` the caller may name.
void spawn_policy_job(caf::actor_system& sys, std::shared_ptr<api_responder> responder,
                      uint64_t request_id, bool explain, std::string body, std::string policy_dir,
                      policy_scope scope);

} // namespace castellan::api
