#include "actors/api/api_actor.hpp"

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <unordered_map>

#include <caf/event_based_actor.hpp>

#include "actors/api/api_error.hpp"
#include "actors/api/api_json.hpp"
#include "actors/api/policy_routes.hpp"
#include "actors/api/session_routes.hpp"
#include "actors/api/workspace_routes.hpp"
#include "actors/api/output_events.hpp"
#include "actors/errors.hpp"

namespace castellan::api {

namespace {

/// How long status and metrics may take before the API answers 503.
constexpr auto query_timeout = std::chrono::seconds(10);

http_response json_response(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

} // namespace

http_response supervisor_error(const caf::error& err, const caf::actor_system& sys) {
  const std::string message = describe(err, sys);
  if (err.category() == caf::detail::error_factory<castellan_errc>::category) {
    switch (static_cast<castellan_errc>(err.code())) {
    case castellan_errc::no_such_pool:
      return json_response(404, error_body("unknown_pool", message, "/pool"));
    case castellan_errc::invalid_request:
      return json_response(400, error_body("invalid_request", message));
    case castellan_errc::policy_invalid:
      return json_response(400, error_body("invalid_policy", message, "/policy"));
    case castellan_errc::no_such_policy:
      return json_response(400, error_body("unknown_policy", message, "/policy"));
    case castellan_errc::shutting_down:
      return json_response(503, error_body("draining", message));
    case castellan_errc::spawn_failed:
      return json_response(503, error_body("pool_down", message));
    case castellan_errc::io_failed:
      break;
    // Only sessions answer these (the session limits; a session that is
    // not, or no more; one whose worker was killed).
    case castellan_errc::busy:
      return json_response(429, error_body("too_many_sessions", message));
    case castellan_errc::no_such_session:
      return json_response(404, error_body("no_such_session", message));
    case castellan_errc::session_ended:
      return json_response(410, error_body("session_ended", message));
    // Workspaces (not served over HTTP yet).
    case castellan_errc::no_such_workspace:
      return json_response(404, error_body("unknown_workspace", message));
    case castellan_errc::workspace_in_use:
      return json_response(409, error_body("workspace_in_use", message));
    case castellan_errc::workspace_exists:
      return json_response(409, error_body("workspace_exists", message));
    case castellan_errc::no_space:
      return json_response(507, error_body("no_space", message));
    case castellan_errc::workspaces_disabled:
      return json_response(501, error_body("workspaces_disabled", message));
    }
  }
  return json_response(500, error_body("internal", message));
}

bool is_no_such_session(const caf::error& err) {
  return err.category() == caf::detail::error_factory<castellan_errc>::category &&
         static_cast<castellan_errc>(err.code()) == castellan_errc::no_such_session;
}

namespace {

/// What the exec handlers share, all used in the api actor only.
struct exec_answerer {
  caf::event_based_actor* self;
  std::shared_ptr<api_responder> responder;
  std::shared_ptr<result_encoder> encoder;
  /// The streamed execs in flight, by exec id.
  std::shared_ptr<std::unordered_map<uint64_t, output_events>> streams;

  /// An exec answered plainly: its result, or the error.
  template <class Handle>
  void plain(Handle pending, uint64_t request_id, std::string id, std::string session) const {
    auto r_ = responder;
    auto enc = encoder;
    auto* s = self;
    pending.then(
        [=](exec_result& r) {
          if (r.error == error_class::busy)
            r_->complete(request_id, json_response(503, error_body("busy", r.detail)));
          else
            r_->complete(request_id, json_response(200, enc->body(r, id)));
        },
        [=](caf::error& err) {
          if (!session.empty() && is_no_such_session(err))
            r_->session_gone(session);
          r_->complete(request_id, supervisor_error(err, s->system()));
        });
  }

  /// A streamed exec: its output as events while it runs, then its result
  /// as the last event. Until the first piece of output the answer is not
  /// started, so that a request refused before it ran (busy, unknown pool)
  /// gets the same status code and error body as a plain one.
  template <class Handle>
  void streamed(Handle pending, uint64_t request_id, uint64_t exec_id, std::string id,
                std::string session) const {
    auto r_ = responder;
    auto enc = encoder;
    auto st = streams;
    auto* s = self;
    auto take = [st, exec_id, request_id] {
      auto it = st->find(exec_id);
      output_events events = it != st->end() ? std::move(it->second) : output_events(request_id);
      if (it != st->end())
        st->erase(it);
      return events;
    };
    pending.then(
        [=](exec_result& r) {
          output_events events = take();
          if (!events.started() && r.error == error_class::busy) {
            r_->complete(request_id, json_response(503, error_body("busy", r.detail)));
            return;
          }
          r_->finish_stream(request_id, events.finish(r, enc->body(r, id)));
        },
        [=](caf::error& err) {
          output_events events = take();
          if (!session.empty() && is_no_such_session(err))
            r_->session_gone(session);
          http_response failed = supervisor_error(err, s->system());
          if (!events.started())
            r_->complete(request_id, std::move(failed));
          else
            r_->finish_stream(request_id, sse_event("error", failed.body));
        });
  }

  /// Runs `req` (on a pool, or in the session `session` when not empty)
  /// and answers `request_id`; streamed when its output_sink is set.
  void run(const supervisor_actor& supervisor, uint64_t request_id, session_ref session,
           exec_request req, std::string id) const {
    const uint64_t exec_id = req.exec_id;
    const bool stream = static_cast<bool>(req.output_sink);
    if (stream)
      streams->emplace(exec_id, output_events(request_id));
    if (session.id.empty()) {
      auto pending = self->request(supervisor, caf::infinite, exec_atom::value, std::move(req));
      if (stream)
        streamed(std::move(pending), request_id, exec_id, std::move(id), std::string{});
      else
        plain(std::move(pending), request_id, std::move(id), std::string{});
    } else {
      std::string session_id = session.id;
      auto pending =
          self->request(supervisor, caf::infinite, exec_atom::value, std::move(session),
                        std::move(req));
      if (stream)
        streamed(std::move(pending), request_id, exec_id, std::move(id), std::move(session_id));
      else
        plain(std::move(pending), request_id, std::move(id), std::move(session_id));
    }
  }
};

/// The api actor's behavior. A function with arguments, not a capturing
/// lambda without: CAF 0.17's spawn of the latter dereferences an empty
/// argument tuple (undefined behaviour, reported by UBSan).
caf::behavior api_behavior(caf::event_based_actor* self, supervisor_actor supervisor,
                           std::shared_ptr<api_responder> responder) {
  // Shared by the handlers below, which all run in this actor, one at a time.
  const exec_answerer execs{self, responder, std::make_shared<result_encoder>(),
                            std::make_shared<std::unordered_map<uint64_t, output_events>>()};
  auto streams = execs.streams;
  caf::message_handler handlers{
      [=](exec_atom, uint64_t request_id, exec_request& req, std::string& id) {
        execs.run(supervisor, request_id, {}, std::move(req), std::move(id));
      },
      [=](exec_atom, uint64_t request_id, session_ref& session, exec_request& req,
          std::string& id) {
        execs.run(supervisor, request_id, std::move(session), std::move(req), std::move(id));
      },
      [=](exec_output_atom, exec_output& o) {
        auto it = streams->find(o.exec_id);
        if (it == streams->end())
          return; // not a stream of this actor's, or over
        std::string event = it->second.piece(o);
        if (!event.empty())
          responder->stream(it->second.request_id(), std::move(event));
      },
      [=](status_atom, uint64_t request_id) {
        self->request(supervisor, query_timeout, status_atom::value)
            .then(
                [=](std::vector<pool_status>& pools) {
                  responder->complete(request_id, json_response(200, pools_body(pools)));
                },
                [=](caf::error& err) {
                  responder->complete(
                      request_id,
                      json_response(503, error_body("unavailable", describe(err, self->system()))));
                });
      },
      [=](status_atom, uint64_t request_id, const std::set<std::string>& visible) {
        self->request(supervisor, query_timeout, status_atom::value)
            .then(
                [=](std::vector<pool_status>& pools) {
                  pools.erase(std::remove_if(pools.begin(), pools.end(),
                                             [&](const pool_status& p) {
                                               return visible.count(p.name) == 0;
                                             }),
                              pools.end());
                  responder->complete(request_id, json_response(200, pools_body(pools)));
                },
                [=](caf::error& err) {
                  responder->complete(
                      request_id,
                      json_response(503, error_body("unavailable", describe(err, self->system()))));
                });
      },
      [=](status_atom, uint64_t request_id, bool draining, uint64_t uptime_ms, uint64_t in_flight,
          uint64_t connections) {
        const server_status server{draining, uptime_ms, in_flight, connections};
        auto unavailable = [=](caf::error& err) {
          responder->complete(
              request_id,
              json_response(503, error_body("unavailable", describe(err, self->system()))));
        };
        self->request(supervisor, query_timeout, status_atom::value)
            .then(
                [=](std::vector<pool_status>& pools) {
                  self->request(supervisor, query_timeout, summary_data_atom::value)
                      .then(
                          [=](telemetry_summary& sum) {
                            responder->complete(request_id,
                                                json_response(200, status_body(server, pools, sum)));
                          },
                          unavailable);
                },
                unavailable);
      },
      [=](metrics_atom, uint64_t request_id) {
        self->request(supervisor, query_timeout, metrics_atom::value)
            .then(
                [=](std::string& text) {
                  http_response r;
                  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
                  r.body = std::move(text);
                  responder->complete(request_id, std::move(r));
                },
                [=](caf::error& err) {
                  responder->complete(
                      request_id,
                      json_response(503, error_body("unavailable", describe(err, self->system()))));
                });
      },
      [=](cancel_atom, uint64_t exec_id) {
        // The exec's own answer (cancelled, or its result if it won the
        // race) comes back on its exec request; this reply says nothing more.
        self->request(supervisor, query_timeout, cancel_atom::value, exec_id)
            .then([](cancel_reply&) {}, [](caf::error&) {});
      },
      [=](cancel_atom, uint64_t request_id, uint64_t exec_id, std::string& id) {
        // The same cancel, answered: the exec's own request still gets its
        // result (`cancelled`, or what it ended with if it finished first).
        self->request(supervisor, query_timeout, cancel_atom::value, exec_id)
            .then(
                [=](cancel_reply& reply) {
                  responder->complete(request_id, json_response(202, cancel_body(reply, id)));
                },
                [=](caf::error& err) {
                  responder->complete(
                      request_id,
                      json_response(503, error_body("unavailable", describe(err, self->system()))));
                });
      },
      // A session's exec: its session cancels it (which ends the session
      // when it runs: its worker is killed).
      [=](cancel_atom, uint64_t exec_id, session_ref& session) {
        self->request(supervisor, query_timeout, session_get_atom::value, session)
            .then(
                [=](session_actor& handle) {
                  self->request(handle, query_timeout, cancel_atom::value, exec_id)
                      .then([](cancel_reply&) {}, [](caf::error&) {});
                },
                [](caf::error&) {});
      },
      [=](cancel_atom, uint64_t request_id, uint64_t exec_id, std::string& id,
          session_ref& session) {
        auto unavailable = [=](caf::error& err) {
          responder->complete(
              request_id,
              json_response(503, error_body("unavailable", describe(err, self->system()))));
        };
        self->request(supervisor, query_timeout, session_get_atom::value, session)
            .then(
                [=](session_actor& handle) {
                  self->request(handle, query_timeout, cancel_atom::value, exec_id)
                      .then(
                          [=](cancel_reply& reply) {
                            responder->complete(request_id,
                                                json_response(202, cancel_body(reply, id)));
                          },
                          unavailable);
                },
                unavailable);
      },
  };
  return handlers.or_else(session_handlers(self, supervisor, responder))
      .or_else(workspace_handlers(self, supervisor, responder));
}

void policy_job(caf::event_based_actor* self, std::shared_ptr<api_responder> responder,
                uint64_t request_id, bool explain, std::string body, std::string policy_dir,
                policy_scope scope) {
  responder->complete(request_id, explain ? explain_policy_request(body, policy_dir, scope)
                                          : check_policy_request(body, policy_dir, scope));
  self->quit();
}

} // namespace

void spawn_policy_job(caf::actor_system& sys, std::shared_ptr<api_responder> responder,
                      uint64_t request_id, bool explain, std::string body, std::string policy_dir,
                      policy_scope scope) {
  sys.spawn(policy_job, std::move(responder), request_id, explain, std::move(body),
            std::move(policy_dir), std::move(scope));
}

caf::actor spawn_api_actor(caf::actor_system& sys, supervisor_actor supervisor,
                           std::shared_ptr<api_responder> responder) {
  return sys.spawn(api_behavior, std::move(supervisor), std::move(responder));
}

} // namespace castellan::api
