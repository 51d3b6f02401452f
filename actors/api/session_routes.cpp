#include "actors/api/session_routes.hpp"

#include <algorithm>
#include <chrono>
#include <vector>

#include "actors/api/api_error.hpp"
#include "actors/api/workspace_routes.hpp"
#include "actors/errors.hpp"

namespace castellan::api {

namespace {

/// How long a list, stats or destroy may take before the API answers 503.
constexpr auto query_timeout = std::chrono::seconds(10);

http_response json_response(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response method_not_allowed(const http_request& req, std::string_view path,
                                 const char* allowed) {
  http_response r =
      json_response(405, error_body("method_not_allowed", req.method + " " + std::string(path) +
                                                              ": use " + allowed));
  r.headers.emplace_back("Allow", allowed);
  return r;
}

http_response no_such_session(const std::string& id) {
  return json_response(404, error_body("no_such_session", "no session '" + id + "'"));
}

http_response unavailable(const caf::error& err, const caf::actor_system& sys) {
  return json_response(503, error_body("unavailable", describe(err, sys)));
}

/// The supervisor's refusal of a create. Options it refuses name their
/// field: the TTLs are checked against maximums only it knows.
http_response create_refused(const caf::error& err, const caf::actor_system& sys) {
  http_response r = supervisor_error(err, sys);
  if (r.status == 400) {
    const std::string message = describe(err, sys);
    const char* field = message.find("idle TTL") != std::string::npos            ? "/idle_ttl_ms"
                        : message.find("maximum lifetime") != std::string::npos ? "/max_lifetime_ms"
                                                                                : "";
    r.body = error_body("invalid_field", message, field);
  }
  return r;
}

} // namespace

std::variant<http_response, caf::message> decide_session_request(const http_request& req,
                                                                  const caller& who,
                                                                  const session_route& route,
                                                                  const session_gate& gate) {
  const std::string_view path = std::string_view(req.target).substr(0, req.target.find('?'));
  switch (route.type) {
  case session_route::kind::collection:
    if (req.method == "GET") {
      // A token limited to some pools lists its own sessions; a token
      // without `pools`, and a caller without a token, every session (as
      // they see every pool and every audit record).
      const token_entry* e = gate.access.entry(who);
      const bool all = who.type != caller::kind::token || (e != nullptr && !e->pools);
      return caf::make_message(session_list_atom::value, req.id, owner_of(who), all);
    }
    if (req.method == "POST") {
      auto parsed = parse_session_options(req.body);
      if (auto* err = std::get_if<api_error>(&parsed))
        return json_response(err->status, err->body());
      auto& opts = std::get<session_options>(parsed);
      if (gate.draining)
        return json_response(503, error_body("draining", "the server is shutting down and "
                                                         "creates no new sessions"));
      // The pool is named explicitly: the one the token was checked for is
      // the one the session is made from.
      const bool named = !opts.pool.empty();
      if (!named)
        opts.pool = gate.default_pool;
      if (!gate.access.may_use(who, opts.pool))
        return json_response(403, error_body("pool_not_allowed",
                                             "token '" + who.name + "' may not use pool '" +
                                                 opts.pool + "'",
                                             named ? "/pool" : ""));
      opts.owner = owner_of(who);
      // A workspace of the caller's own, by the store's name for it.
      if (!opts.workspace.empty()) {
        if (auto bad = check_workspace_name(opts.owner, opts.workspace, "/workspace"))
          return json_response(bad->status, bad->body());
        opts.workspace = store_workspace_name(opts.owner, opts.workspace);
      }
      return caf::make_message(session_create_atom::value, req.id, std::move(opts));
    }
    return method_not_allowed(req, path, "GET, POST");
  case session_route::kind::one: {
    if (req.method != "GET" && req.method != "DELETE")
      return method_not_allowed(req, path, "GET, DELETE");
    // Another token's session reads as no session at all.
    const auto* known = gate.sessions.find(route.id, who);
    if (known == nullptr)
      return no_such_session(route.id);
    // The supervisor checks the owner again (session_ref).
    session_ref ref{route.id, known->owner};
    if (req.method == "GET")
      return caf::make_message(session_get_atom::value, req.id, std::move(ref));
    // From now on no exec is admitted to it.
    gate.sessions.erase(route.id);
    return caf::make_message(destroy_atom::value, req.id, std::move(ref));
  }
  case session_route::kind::exec:
  case session_route::kind::run:
  case session_route::kind::files:
  case session_route::kind::none:
  case session_route::kind::unknown:
    break;
  }
  return json_response(404, error_body("not_found",
                                       "no route " + std::string(path) +
                                           " (GET and POST /v1/sessions; GET and DELETE "
                                           "/v1/sessions/{id}; POST /v1/sessions/{id}/exec "
                                           "and /v1/sessions/{id}/run)"));
}

caf::message_handler session_handlers(caf::event_based_actor* self, supervisor_actor supervisor,
                                      std::shared_ptr<api_responder> responder) {
  return {
      [=](session_create_atom, uint64_t request_id, session_options& opts) {
        // A create waits for the session's worker; the supervisor bounds it
        // (its create timeout).
        self->request(supervisor, caf::infinite, session_create_atom::value, std::move(opts))
            .then(
                [=](session_info& info) {
                  // The registry learns of the new session before its
                  // client does, from the supervisor's whole list.
                  self->request(supervisor, query_timeout, session_list_atom::value)
                      .then(
                          [=](std::vector<session_info>& live) {
                            responder->sessions_listed(live);
                            responder->complete(request_id,
                                                json_response(201, session_info_body(info)));
                          },
                          [=](caf::error& err) {
                            responder->complete(request_id, unavailable(err, self->system()));
                          });
                },
                [=](caf::error& err) {
                  responder->complete(request_id, create_refused(err, self->system()));
                });
      },
      [=](session_list_atom, uint64_t request_id, std::string& owner, bool all) {
        self->request(supervisor, query_timeout, session_list_atom::value)
            .then(
                [=](std::vector<session_info>& live) {
                  responder->sessions_listed(live);
                  if (!all)
                    live.erase(std::remove_if(live.begin(), live.end(),
                                              [&](const session_info& s) {
                                                return s.owner != owner;
                                              }),
                               live.end());
                  responder->complete(request_id, json_response(200, session_list_body(live)));
                },
                [=](caf::error& err) {
                  responder->complete(request_id, unavailable(err, self->system()));
                });
      },
      [=](session_get_atom, uint64_t request_id, session_ref& ref) {
        const std::string id = ref.id;
        self->request(supervisor, query_timeout, status_atom::value, ref)
            .then(
                [=](session_stats& stats) {
                  responder->complete(request_id, json_response(200, session_stats_body(stats)));
                },
                [=](caf::error& err) {
                  if (is_no_such_session(err))
                    responder->session_gone(id);
                  responder->complete(request_id, supervisor_error(err, self->system()));
                });
      },
      [=](destroy_atom, uint64_t request_id, session_ref& ref) {
        self->request(supervisor, query_timeout, destroy_atom::value, ref)
            .then(
                [=](session_stats& stats) {
                  responder->complete(request_id, json_response(200, session_stats_body(stats)));
                },
                [=](caf::error& err) {
                  responder->complete(request_id, supervisor_error(err, self->system()));
                });
      },
  };
}

} // namespace castellan::api
