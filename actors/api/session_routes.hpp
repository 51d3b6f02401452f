#pragma once

/// @file session_routes.hpp
/// The session routes of the API (docs/api.md, "Sessions"): `POST` and `GET
/// /v1/sessions`, `GET` and `DELETE /v1/sessions/{id}`. Their requests are
/// decided on the I/O thread (decide_session_request: the caller's pools
/// and sessions, under the API's lock) and answered by the api actor
/// (session_handlers), which asks the supervisor. The execs of a session
/// (`POST /v1/sessions/{id}/exec|run`) are admitted as every exec is, by
/// api_service, and run by the api actor's exec handlers.
///
/// The api actor's messages for them:
///
///   (session_create_atom, uint64_t request_id, session_options)  → POST /v1/sessions
///   (session_list_atom, uint64_t request_id, std::string owner, bool all)
///                                      → GET /v1/sessions: every session, or `owner`'s
///   (session_get_atom, uint64_t request_id, session_ref)         → GET /v1/sessions/{id}
///   (destroy_atom, uint64_t request_id, session_ref)             → DELETE /v1/sessions/{id}

#include <cstdint>
#include <memory>
#include <string>
#include <variant>

#include <caf/event_based_actor.hpp>
#include <caf/message.hpp>
#include <caf/message_handler.hpp>

#include "actors/api/access_control.hpp"
#include "actors/api/api_actor.hpp"
#include "actors/api/http_server.hpp"
#include "actors/api/session_json.hpp"
#include "actors/api/session_registry.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

namespace castellan::api {

/// What the I/O thread decides a session request from: the API's state,
/// under its lock.
struct session_gate {
  const access_control& access;
  session_registry& sessions;
  /// Where a create that names no pool makes its session.
  const std::string& default_pool;
  bool draining;
};

/// A request to `route` (a session route other than exec and run),
/// decided: the response to send at once (a refusal), or the message for
/// the api actor. A DELETE takes the session out of the registry now.
std::variant<http_response, caf::message> decide_session_request(const http_request& req,
                                                                  const caller& who,
                                                                  const session_route& route,
                                                                  const session_gate& gate);

/// The api actor's handlers of the messages above.
caf::message_handler session_handlers(caf::event_based_actor* self, supervisor_actor supervisor,
                                      std::shared_ptr<api_responder> responder);

} // namespace castellan::api
