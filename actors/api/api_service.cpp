#include "actors/api/api_service.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <caf/send.hpp>
#include <nlohmann/json.hpp>

#include "actors/api/api_actor.hpp"
#include "actors/api/output_events.hpp"
#include "actors/api/api_error.hpp"
#include "actors/api/api_json.hpp"
#include "actors/api/audit_params.hpp"
#include "actors/api/audit_stream.hpp"
#include "actors/api/policy_scope.hpp"
#include "actors/api/session_files_routes.hpp"
#include "actors/api/session_routes.hpp"
#include "actors/api/workspace_routes.hpp"
#include "actors/audit/rfc3339.hpp"
#include "actors/exec_json.hpp"

namespace castellan::api {

namespace {

http_response json_response(unsigned status, std::string body) {
  http_response r;
  r.status = status;
  r.body = std::move(body);
  return r;
}

http_response error_response(unsigned status, std::string_view code, std::string_view message) {
  return json_response(status, error_body(code, message));
}

/// `application/json`, with or without parameters (`; charset=utf-8`).
bool is_json_media_type(std::string_view value) {
  auto semi = value.find(';');
  std::string_view type = value.substr(0, semi);
  while (!type.empty() && (type.back() == ' ' || type.back() == '\t'))
    type.remove_suffix(1);
  while (!type.empty() && (type.front() == ' ' || type.front() == '\t'))
    type.remove_prefix(1);
  constexpr std::string_view want = "application/json";
  return type.size() == want.size() &&
         std::equal(type.begin(), type.end(), want.begin(), [](char a, char b) {
           return std::tolower(static_cast<unsigned char>(a)) == b;
         });
}

/// An Accept header that asks for server-sent events: `text/event-stream`
/// among its media ranges (parameters and case aside).
bool accepts_event_stream(std::string_view accept) {
  constexpr std::string_view want = "text/event-stream";
  while (!accept.empty()) {
    const auto comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    range = range.substr(0, range.find(';'));
    while (!range.empty() && (range.front() == ' ' || range.front() == '\t'))
      range.remove_prefix(1);
    while (!range.empty() && (range.back() == ' ' || range.back() == '\t'))
      range.remove_suffix(1);
    if (range.size() == want.size() &&
        std::equal(range.begin(), range.end(), want.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == b;
        }))
      return true;
    if (comma == std::string_view::npos)
      break;
    accept.remove_prefix(comma + 1);
  }
  return false;
}

/// A Host header that names this machine's loopback: what a TCP client on
/// loopback sends. A page a browser loaded from elsewhere (DNS rebinding)
/// sends its own name and is refused.
bool loopback_host(std::string_view host) {
  std::string_view name = host;
  if (!name.empty() && name.front() == '[') {
    auto close = name.find(']');
    if (close == std::string_view::npos)
      return false;
    name = name.substr(1, close - 1);
    return name == "::1";
  }
  name = name.substr(0, name.find(':'));
  if (name == "localhost")
    return true;
  if (name.substr(0, 4) != "127.")
    return false;
  return std::all_of(name.begin(), name.end(),
                     [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

/// A POST whose body is not JSON. Refusing other media types keeps a web
/// page from posting to a loopback listener: a browser sends
/// application/json only after a CORS preflight, which this server never
/// grants.
http_response unsupported_media_type(const http_request& req) {
  return error_response(415, "unsupported_media_type",
                        "Content-Type must be application/json, not '" + req.content_type + "'");
}

/// An exec the API admitted and has not answered yet.
struct in_flight_exec {
  uint64_t exec_id = 0; ///< the API's number for it, never reused by this daemon
  std::string id;       ///< the client's name for it ("" when it gave none)
  /// Who admitted it: its token counts it, and only that token (or a
  /// caller without one) may cancel it.
  caller owner;
  /// The pool the token was admitted to: a reload that takes it from the
  /// token (or revokes the token) cancels the exec.
  std::string pool;
  /// For a request with its own policy, the default pool its policy pool
  /// is made from, which the token needed too; empty otherwise. A reload
  /// that takes it from the token cancels the exec as well.
  std::string template_pool;
  /// Its answer is streamed and has begun (api_responder::stream).
  bool streaming = false;
  /// The session it runs in and that session's owner, as the supervisor's
  /// by-id messages take them; an empty id for an exec on a pool. Its
  /// session cancels it, not the supervisor.
  session_ref session;
};

/// Whether `who` may cancel `exec`. A caller without a token (the unix
/// socket's users, whose permissions admit them; a plain loopback listener
/// without a tokens file) may cancel any exec; a token only its own.
bool may_cancel(const in_flight_exec& exec, const caller& who) {
  if (who.type != caller::kind::token)
    return true;
  return exec.owner.type == caller::kind::token && exec.owner.digest == who.digest;
}

/// The key of a client's id in by_client_id: ids are the caller's own, so
/// that a token neither collides with another's ids (409) nor learns them.
std::string client_key(const caller& who, const std::string& id) {
  if (who.type != caller::kind::token)
    return "-" + id;
  return to_hex(who.digest) + "-" + id;
}

/// `text` as a decimal exec id, or 0 when it is not one.
uint64_t decimal_exec_id(std::string_view text) {
  if (text.empty() || text.size() > 20)
    return 0;
  uint64_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return 0;
    const auto digit = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - digit) / 10)
      return 0;
    v = v * 10 + digit;
  }
  return v;
}

} // namespace

struct api_service::state final : api_responder, audit_stream_sink, files_sink {
  caf::actor_system* sys = nullptr;
  std::weak_ptr<state> self; ///< this, for the policy jobs that answer through it
  std::string policy_dir;
  caf::actor actor;
  const std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  http_server* srv = nullptr;          ///< the server, for its own I/O thread
  std::unique_ptr<http_server> server; ///< owned; stopped, never reset, by stop()

  std::string default_pool; ///< where a request without `pool` runs
  std::map<std::string, std::string> pool_policies; ///< api_options::pool_policies; under `m`

  mutable std::mutex m;
  std::condition_variable idle_cv;
  /// Execs in flight by the server's request id, and two indexes into it:
  /// by the client's id (scoped to its caller, client_key) and by exec id.
  /// All under `m`.
  std::unordered_map<uint64_t, in_flight_exec> execs;
  std::unordered_map<std::string, uint64_t> by_client_id;
  std::unordered_map<uint64_t, uint64_t> by_exec_id;
  /// The audit streams (GET /v1/audit) by request id, under `m`: their
  /// actor, and whether their head is sent.
  struct audit_stream_entry {
    caf::actor actor;
    bool head_sent = false;
    /// Who opened it, and the view it was opened with (its token's name
    /// and pools then): a reload that revokes the token or changes that
    /// view ends the stream (end_streams_out_of_view).
    caller owner;
    std::optional<std::set<std::string>> pools;
  };
  std::unordered_map<uint64_t, audit_stream_entry> audit_streams;
  /// The files requests in flight (session_files_routes.hpp) by request
  /// id, under `m`: their actor (null while it is spawned).
  std::unordered_map<uint64_t, caf::actor> files_jobs;
  supervisor_actor supervisor;
  file_sink_config audit_file;
  access_control access;     ///< under `m`
  session_registry sessions; ///< under `m`
  uint64_t next_exec_id = 1; ///< under `m`
  bool draining = false;     ///< under `m`
  bool stopped = false;      ///< under `m`

  /// Takes the exec of `request_id` out of the maps; whether its answer
  /// was being streamed. Under `m`. The exec leaves before its answer is
  /// written: a client that has its answer can use the exec's id again at
  /// once.
  bool forget_exec(uint64_t request_id) {
    auto it = execs.find(request_id);
    if (it == execs.end())
      return false;
    const bool streaming = it->second.streaming;
    if (!it->second.id.empty())
      by_client_id.erase(client_key(it->second.owner, it->second.id));
    by_exec_id.erase(it->second.exec_id);
    access.release(it->second.owner);
    execs.erase(it);
    if (execs.empty())
      idle_cv.notify_all();
    return streaming;
  }

  void complete(uint64_t request_id, http_response response) override {
    std::lock_guard<std::mutex> guard(m);
    forget_exec(request_id);
    if (!stopped && server)
      server->respond(request_id, std::move(response));
  }

  void stream(uint64_t request_id, std::string bytes) override {
    std::lock_guard<std::mutex> guard(m);
    auto it = execs.find(request_id);
    if (stopped || !server || it == execs.end())
      return;
    if (!it->second.streaming) {
      it->second.streaming = true;
      server->respond_stream(request_id, 200, "text/event-stream; charset=utf-8");
    }
    server->stream(request_id, std::move(bytes));
  }

  void finish_stream(uint64_t request_id, std::string bytes) override {
    std::lock_guard<std::mutex> guard(m);
    const bool head_sent = forget_exec(request_id);
    if (stopped || !server)
      return;
    // In order on the I/O thread: the head (unless a piece sent it), the
    // last piece, the end.
    if (!head_sent)
      server->respond_stream(request_id, 200, "text/event-stream; charset=utf-8");
    server->stream(request_id, std::move(bytes));
    server->end_stream(request_id);
  }

  void sessions_listed(const std::vector<session_info>& live) override {
    std::lock_guard<std::mutex> guard(m);
    sessions.replace(live);
  }

  void session_gone(const std::string& id) override {
    std::lock_guard<std::mutex> guard(m);
    sessions.erase(id);
  }

  /// Cancels `x` (no answer): its session does, or the supervisor. Under `m`.
  void send_cancel(const in_flight_exec& x) {
    if (x.session.id.empty())
      caf::anon_send(actor, cancel_atom::value, x.exec_id);
    else
      caf::anon_send(actor, cancel_atom::value, x.exec_id, x.session);
  }

  // -- files_sink --------------------------------------------------------------

  void files_respond(uint64_t request_id, http_response response) override {
    std::lock_guard<std::mutex> guard(m);
    if (files_jobs.erase(request_id) == 0 || stopped || !server)
      return;
    server->respond(request_id, std::move(response));
  }

  void files_head(uint64_t request_id, uint64_t size) override {
    std::lock_guard<std::mutex> guard(m);
    if (files_jobs.count(request_id) == 0 || stopped || !server)
      return;
    server->respond_stream(request_id, 200, "application/octet-stream",
                           {{"Content-Length", std::to_string(size)}});
  }

  void files_piece(uint64_t request_id, std::string bytes,
                   std::function<void()> on_written) override {
    std::lock_guard<std::mutex> guard(m);
    if (files_jobs.count(request_id) == 0 || stopped || !server)
      return;
    server->stream(request_id, std::move(bytes), std::move(on_written));
  }

  void files_finish(uint64_t request_id) override {
    std::lock_guard<std::mutex> guard(m);
    if (files_jobs.erase(request_id) == 0 || stopped || !server)
      return;
    server->end_stream(request_id);
  }

  /// Whether the body of `head` may be an upload's: a PUT of a files
  /// route by a caller this server admits.
  bool may_upload(const http_request& head) {
    if (head.method != "PUT")
      return false;
    const std::string_view target = head.target;
    if (match_session_route(target.substr(0, target.find('?'))).type !=
        session_route::kind::files)
      return false;
    std::lock_guard<std::mutex> guard(m);
    return access.identify(head.authorization, head.tcp && access.has_tokens_file()).allowed();
  }

  /// `/v1/sessions/{id}/files…`: the caller's own session only, on a pool
  /// its token may still use; then an actor of its own does the work.
  void route_files(http_request req, const caller& who, const session_route& route,
                   std::string_view query) {
    auto parsed = parse_files_request(req.method, route.id, route.files_rest, query);
    if (auto* now = std::get_if<http_response>(&parsed)) {
      srv->respond(req.id, std::move(*now));
      return;
    }
    auto& fr = std::get<files_http_request>(parsed);
    if (fr.type == files_http_request::kind::upload)
      fr.request.data = std::move(req.body);
    else if (!req.body.empty()) {
      srv->respond(req.id, error_response(400, "invalid_request",
                                          "this request takes no body (a file's bytes go "
                                          "with a PUT without ?mkdir)"));
      return;
    }
    {
      std::lock_guard<std::mutex> guard(m);
      const session_registry::entry* e = sessions.find(route.id, who);
      if (e == nullptr) {
        srv->respond(req.id, error_response(404, "no_such_session",
                                            "no session '" + route.id + "'"));
        return;
      }
      if (!access.may_use(who, e->pool)) {
        srv->respond(req.id, error_response(403, "pool_not_allowed",
                                            "token '" + who.name + "' may not use pool '" +
                                                e->pool + "', which session '" + route.id +
                                                "' was made from"));
        return;
      }
      fr.session.owner = e->owner;
      files_jobs.emplace(req.id, caf::actor{});
    }
    auto job = spawn_files_http_job(*sys, supervisor, self.lock(), req.id, std::move(fr));
    std::lock_guard<std::mutex> guard(m);
    auto it = files_jobs.find(req.id);
    if (it == files_jobs.end() || stopped) {
      // Answered already, or its client left while it was spawned: it ends
      // (or has ended) by itself; an exit stops a download it reads.
      if (it != files_jobs.end())
        files_jobs.erase(it);
      caf::anon_send_exit(job, caf::exit_reason::user_shutdown);
      return;
    }
    it->second = std::move(job);
  }

  // -- audit_stream_sink -------------------------------------------------------

  void refuse(uint64_t request_id, http_response response) override {
    std::lock_guard<std::mutex> guard(m);
    if (audit_streams.erase(request_id) == 0 || stopped || !server)
      return;
    server->respond(request_id, std::move(response));
  }

  void piece(uint64_t request_id, std::string bytes, std::function<void()> on_written) override {
    std::lock_guard<std::mutex> guard(m);
    auto it = audit_streams.find(request_id);
    if (stopped || !server || it == audit_streams.end())
      return;
    if (!it->second.head_sent) {
      it->second.head_sent = true;
      server->respond_stream(request_id, 200, "text/event-stream; charset=utf-8");
    }
    server->stream(request_id, std::move(bytes), std::move(on_written));
  }

  void finish(uint64_t request_id, std::string bytes) override {
    std::lock_guard<std::mutex> guard(m);
    auto it = audit_streams.find(request_id);
    if (stopped || !server || it == audit_streams.end())
      return;
    if (!it->second.head_sent)
      server->respond_stream(request_id, 200, "text/event-stream; charset=utf-8");
    audit_streams.erase(it);
    server->stream(request_id, std::move(bytes));
    server->end_stream(request_id);
  }

  /// What a request whose token a reload revoked, after it was identified,
  /// is answered: what it would be answered now.
  static http_response revoked_response() {
    http_response r = error_response(
        401, "unauthorized", "the Authorization header is not a valid bearer token of this server");
    r.headers.emplace_back("WWW-Authenticate", R"(Bearer realm="castellan", error="invalid_token")");
    return r;
  }

  /// Ends the audit stream `it` with an `end` event that gives `reason`.
  /// Under `m`; its actor gets an exit, and what it hands over afterwards
  /// finds no stream (piece() and finish() drop it).
  void end_audit_stream(std::unordered_map<uint64_t, audit_stream_entry>::iterator it,
                        const std::string& reason) {
    const uint64_t id = it->first;
    if (!it->second.head_sent)
      srv->respond_stream(id, 200, "text/event-stream; charset=utf-8");
    srv->stream(id, sse_event("end", dump_json(nlohmann::json{{"v", 1}, {"reason", reason}})));
    srv->end_stream(id);
    if (it->second.actor)
      caf::anon_send_exit(it->second.actor, caf::exit_reason::user_shutdown);
    audit_streams.erase(it);
  }

  /// After a reload (under `m`): the audit streams whose token is revoked,
  /// or whose token's name or pools are no longer those the stream was
  /// opened with, end. A stream never goes on with a view its token no
  /// longer has; its client reconnects for the new one.
  void end_streams_out_of_view() {
    for (auto it = audit_streams.begin(); it != audit_streams.end();) {
      auto next = std::next(it);
      const caller& owner = it->second.owner;
      if (owner.type == caller::kind::token) {
        const token_entry* e = access.entry(owner);
        std::optional<std::set<std::string>> pools;
        if (e != nullptr && e->pools)
          pools.emplace(e->pools->begin(), e->pools->end());
        if (e == nullptr)
          end_audit_stream(it, "token '" + owner.name + "' was revoked");
        else if (e->name != owner.name)
          end_audit_stream(it, "token '" + owner.name + "' was renamed '" + e->name + "'");
        else if (pools != it->second.pools)
          end_audit_stream(it, "the pools of token '" + owner.name +
                                   "' changed: reconnect to see what they are now");
      }
      it = next;
    }
  }

  /// `GET /v1/audit`: a stream of the audit's records (audit_stream.hpp).
  void open_audit_stream(const http_request& req, const caller& who, std::string_view query) {
    auto parsed = parse_audit_params(query, realtime_ns());
    if (auto* err = std::get_if<api_error>(&parsed)) {
      srv->respond(req.id, json_response(err->status, err->body()));
      return;
    }
    audit_stream_request r;
    r.params = std::get<audit_params>(parsed);
    r.file = audit_file;
    if (r.params.since_ns && audit_file.path.empty()) {
      api_error e;
      e.code = "no_audit_file";
      e.message = "since reads the audit file back, and this server writes none (the config's "
                  "[audit] file is off): ask for live records only";
      e.field = "since";
      srv->respond(req.id, json_response(400, e.body()));
      return;
    }
    {
      std::lock_guard<std::mutex> guard(m);
      audit_stream_entry entry;
      entry.owner = who;
      if (who.type == caller::kind::token) {
        const token_entry* e = access.entry(who);
        if (e == nullptr) {
          // Revoked by a reload since the request was identified.
          srv->respond(req.id, revoked_response());
          return;
        }
        if (e->pools) {
          r.pools.emplace(e->pools->begin(), e->pools->end());
          // A token limited to some pools sees its own execs only.
          r.own_token = e->name;
        }
        entry.owner.name = e->name;
        entry.pools = r.pools;
      }
      audit_streams.emplace(req.id, std::move(entry));
    }
    auto actor_hdl = spawn_audit_stream(*sys, supervisor, self.lock(), req.id, std::move(r));
    std::lock_guard<std::mutex> guard(m);
    auto it = audit_streams.find(req.id);
    if (it == audit_streams.end() || stopped) {
      // Its client left (or the server stopped) while it was spawned.
      caf::anon_send_exit(actor_hdl, caf::exit_reason::user_shutdown);
      return;
    }
    it->second.actor = std::move(actor_hdl);
  }

  static constexpr std::string_view execs_prefix = "/v1/execs/";

  /// The routes; on the I/O thread.
  void on_request(http_request req) {
    const std::string_view target = req.target;
    const std::string_view path = target.substr(0, target.find('?'));
    // Plain TCP listens on loopback only, and a page that reaches it
    // through DNS rebinding names its own host. A TLS listener is reached
    // by any name its certificate has.
    if (req.tcp && !req.tls && !loopback_host(req.host)) {
      srv->respond(req.id, error_response(403, "forbidden_host",
                                          "the Host header '" + req.host +
                                              "' does not name a loopback address"));
      return;
    }
    caller who;
    // A token with a pool allowlist sees those pools only: not the others'
    // state, nor the daemon-wide views that show every pool.
    std::optional<std::set<std::string>> visible;
    // And it names only the policies of those pools.
    policy_scope scope;
    {
      std::lock_guard<std::mutex> guard(m);
      who = access.identify(req.authorization, req.tcp && access.has_tokens_file());
      if (const token_entry* e = access.entry(who); e && e->pools) {
        visible.emplace(e->pools->begin(), e->pools->end());
        scope = scope_of(e->name, *e->pools, pool_policies);
      }
    }
    // The secret goes no further than this.
    req.authorization.clear();
    if (!who.allowed()) {
      const bool missing = who.type == caller::kind::missing;
      http_response r = error_response(
          401, "unauthorized",
          missing ? "this listener needs a bearer token: Authorization: Bearer <token>"
                  : "the Authorization header is not a valid bearer token of this server");
      // RFC 6750: a request without credentials gets the bare challenge,
      // one with bad credentials the invalid_token error.
      r.headers.emplace_back("WWW-Authenticate",
                             missing ? R"(Bearer realm="castellan")"
                                     : R"(Bearer realm="castellan", error="invalid_token")");
      srv->respond(req.id, std::move(r));
      return;
    }
    auto allow = [&](const char* method) {
      if (req.method == method)
        return true;
      http_response r = error_response(405, "method_not_allowed",
                                       req.method + " " + std::string(path) + ": use " + method);
      r.headers.emplace_back("Allow", method);
      srv->respond(req.id, std::move(r));
      return false;
    };
    if (path == "/v1/exec" || path == "/v1/run") {
      if (allow("POST"))
        admit_exec(std::move(req), path == "/v1/run", who);
    } else if (auto route = match_session_route(path); route.type != session_route::kind::none) {
      route_session(std::move(req), who, route);
    } else if (is_workspace_path(path)) {
      if (req.method == "POST" && !is_json_media_type(req.content_type)) {
        srv->respond(req.id, unsupported_media_type(req));
        return;
      }
      auto decided = decide_workspace_request(req, who);
      if (auto* now = std::get_if<http_response>(&decided))
        srv->respond(req.id, std::move(*now));
      else
        caf::anon_send(actor, std::move(std::get<caf::message>(decided)));
    } else if (path.substr(0, execs_prefix.size()) == execs_prefix &&
               path.size() > execs_prefix.size() &&
               path.find('/', execs_prefix.size()) == std::string_view::npos) {
      if (allow("DELETE"))
        cancel_exec(req, who, path.substr(execs_prefix.size()));
    } else if (path == "/v1/policies/check" || path == "/v1/policies/explain") {
      if (allow("POST")) {
        if (!is_json_media_type(req.content_type)) {
          srv->respond(req.id, unsupported_media_type(req));
          return;
        }
        spawn_policy_job(*sys, self.lock(), req.id, path == "/v1/policies/explain",
                         std::move(req.body), policy_dir, std::move(scope));
      }
    } else if (path == "/v1/audit") {
      if (allow("GET"))
        open_audit_stream(req, who,
                          path.size() < target.size() ? target.substr(path.size() + 1)
                                                      : std::string_view{});
    } else if (path == "/v1/pools") {
      if (allow("GET")) {
        if (visible)
          caf::anon_send(actor, status_atom::value, req.id, std::move(*visible));
        else
          caf::anon_send(actor, status_atom::value, req.id);
      }
    } else if ((path == "/v1/status" || path == "/metrics") && visible) {
      srv->respond(req.id, error_response(403, "pool_not_allowed",
                                          "token '" + who.name + "' may use only some pools; " +
                                              std::string(path) +
                                              " shows every pool (GET /v1/pools shows yours)"));
    } else if (path == "/v1/status") {
      if (allow("GET")) {
        bool d;
        uint64_t n;
        {
          std::lock_guard<std::mutex> guard(m);
          d = draining;
          n = execs.size();
        }
        const auto uptime = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::steady_clock::now() - started);
        caf::anon_send(actor, status_atom::value, req.id, d,
                       static_cast<uint64_t>(uptime.count()), n,
                       static_cast<uint64_t>(srv->connections()));
      }
    } else if (path == "/metrics") {
      if (allow("GET"))
        caf::anon_send(actor, metrics_atom::value, req.id);
    } else if (path == "/v1/health") {
      if (allow("GET")) {
        bool d;
        {
          std::lock_guard<std::mutex> guard(m);
          d = draining;
        }
        srv->respond(req.id, json_response(200, d ? R"({"v":1,"status":"draining"})"
                                                  : R"({"v":1,"status":"ok"})"));
      }
    } else {
      srv->respond(req.id, error_response(404, "not_found",
                                          "no route " + std::string(path) +
                                              " (POST /v1/exec, POST /v1/run, "
                                              "DELETE /v1/execs/{id}, /v1/sessions, /v1/workspaces, "
                                              "POST /v1/policies/check, "
                                              "POST /v1/policies/explain, GET /v1/status, "
                                              "GET /v1/pools, GET /v1/audit, GET /v1/health, "
                                              "GET /metrics)"));
    }
  }

  /// A request under /v1/sessions: the execs of a session are admitted as
  /// every exec is; the rest decided by decide_session_request.
  void route_session(http_request req, const caller& who, const session_route& route) {
    if (route.type == session_route::kind::files) {
      const std::string_view target = req.target;
      const auto q = target.find('?');
      const std::string query =
          q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
      route_files(std::move(req), who, route, query);
      return;
    }
    if (route.type == session_route::kind::exec || route.type == session_route::kind::run) {
      if (req.method != "POST") {
        http_response r = error_response(405, "method_not_allowed",
                                         req.method + " " + req.target + ": use POST");
        r.headers.emplace_back("Allow", "POST");
        srv->respond(req.id, std::move(r));
        return;
      }
      const std::string session = route.id;
      admit_exec(std::move(req), route.type == session_route::kind::run, who, session);
      return;
    }
    if (req.method == "POST" && !is_json_media_type(req.content_type)) {
      srv->respond(req.id, unsupported_media_type(req));
      return;
    }
    std::lock_guard<std::mutex> guard(m);
    auto decided =
        decide_session_request(req, who, route, session_gate{access, sessions, default_pool,
                                                             draining});
    if (auto* now = std::get_if<http_response>(&decided))
      srv->respond(req.id, std::move(*now));
    else
      caf::anon_send(actor, std::move(std::get<caf::message>(decided)));
  }

  /// `POST /v1/exec`, `/v1/run`, and with `session` the same in that
  /// session (`POST /v1/sessions/{id}/exec|run`).
  void admit_exec(http_request req, bool command, const caller& who,
                  const std::string& session = {}) {
    if (!is_json_media_type(req.content_type)) {
      srv->respond(req.id, unsupported_media_type(req));
      return;
    }
    auto parsed = parse_exec_body(req.body, command, !session.empty());
    if (auto* err = std::get_if<api_error>(&parsed)) {
      srv->respond(req.id, json_response(err->status, err->body()));
      return;
    }
    auto& body = std::get<exec_body>(parsed);
    exec_request& er = body.request;
    // Streamed (server-sent events): the pools send this actor the output
    // as it is written.
    if (accepts_event_stream(req.accept))
      er.output_sink = actor;
    {
      std::lock_guard<std::mutex> guard(m);
      if (draining) {
        srv->respond(req.id, error_response(503, "draining",
                                            "the server is shutting down and admits no new "
                                            "execs"));
        return;
      }
      const std::string key = client_key(who, body.id);
      if (!body.id.empty() && by_client_id.count(key) != 0) {
        srv->respond(req.id,
                     json_response(409, error_body("duplicate_id",
                                                   "an exec with id '" + body.id +
                                                       "' is in flight; ids are unique among "
                                                       "the execs in flight",
                                                   "/id")));
        return;
      }
      // A session's exec runs on the pool it was made from, which the
      // token must still be allowed; another token's session is none.
      const session_registry::entry* in_session = nullptr;
      if (!session.empty()) {
        in_session = sessions.find(session, who);
        if (in_session == nullptr) {
          srv->respond(req.id,
                       error_response(404, "no_such_session", "no session '" + session + "'"));
          return;
        }
      }
      // A request with its own policy is checked against the pool it
      // names as well: the allowlist is of pools, whatever the policy.
      const std::string pool =
          in_session != nullptr ? in_session->pool : er.pool.empty() ? default_pool : er.pool;
      // And a request policy may run in a pool of its own, made from the
      // default pool (its template and ceiling): a token needs that pool
      // too.
      if (!er.policy.empty() && !access.may_use(who, default_pool)) {
        srv->respond(req.id,
                     json_response(403, error_body("pool_not_allowed",
                                                   "token '" + who.name +
                                                       "' may not use pool '" + default_pool +
                                                       "', whose settings a request policy's "
                                                       "own pool is made from",
                                                   "/policy")));
        return;
      }
      // A request policy's `extends` names policies of the directory, as
      // a posted one's does: a token limited to some pools names only
      // theirs (as it stands now, under `m`).
      if (!er.policy.empty())
        if (const token_entry* e = access.entry(who); e && e->pools) {
          const auto doc = nlohmann::json::parse(er.policy, nullptr, false);
          if (auto refused =
                  refuse_extends(scope_of(e->name, *e->pools, pool_policies), doc, "/policy")) {
            srv->respond(req.id, json_response(refused->status, refused->body()));
            return;
          }
        }
      switch (access.admit(who, pool)) {
      case admission::admitted:
        break;
      case admission::pool_not_allowed: {
        http_response r = json_response(403, error_body("pool_not_allowed",
                                                        "token '" + who.name +
                                                            "' may not use pool '" + pool + "'",
                                                        er.pool.empty() ? "" : "/pool"));
        if (in_session != nullptr)
          r.body = error_body("pool_not_allowed",
                              "token '" + who.name + "' may no longer use pool '" + pool +
                                  "', which session '" + session + "' was made from");
        srv->respond(req.id, std::move(r));
        return;
      }
      case admission::too_many_execs:
        srv->respond(req.id, error_response(429, "too_many_execs",
                                            "token '" + who.name + "' has " +
                                                std::to_string(access.entry(who)->max_concurrent) +
                                                " execs in flight, its max_concurrent"));
        return;
      }
      // The API numbers every exec, so that a client that goes away, or a
      // DELETE, can have it cancelled.
      er.exec_id = next_exec_id++;
      er.origin.peer = req.peer;
      er.origin.token = who.type == caller::kind::token ? who.name : std::string{};
      in_flight_exec x;
      x.exec_id = er.exec_id;
      x.id = body.id;
      x.owner = who;
      x.pool = pool;
      if (in_session != nullptr)
        x.session = session_ref{session, in_session->owner};
      const session_ref in = x.session;
      if (!er.policy.empty())
        x.template_pool = default_pool;
      if (!x.id.empty())
        by_client_id.emplace(key, req.id);
      by_exec_id.emplace(x.exec_id, req.id);
      execs.emplace(req.id, std::move(x));
      // Sent under `m`, so that a cancel for this exec (a DELETE, or a
      // reload that revokes its token) that finds it in `execs` is queued
      // to the actor after it, never before.
      if (session.empty())
        caf::anon_send(actor, exec_atom::value, req.id, std::move(er), std::move(body.id));
      else
        caf::anon_send(actor, exec_atom::value, req.id, in, std::move(er), std::move(body.id));
    }
  }

  /// `DELETE /v1/execs/{key}`: `key` is the client's id of an exec in
  /// flight, or its exec id. The cancel goes by exec id, which this daemon
  /// never gives twice: an exec that took over a client's id after the
  /// named one finished is never cancelled by a DELETE meant for that one.
  void cancel_exec(const http_request& req, const caller& who, std::string_view key) {
    std::lock_guard<std::mutex> guard(m);
    auto found = execs.end();
    if (auto n = by_client_id.find(client_key(who, std::string(key))); n != by_client_id.end())
      found = execs.find(n->second);
    else if (auto e = by_exec_id.find(decimal_exec_id(key)); e != by_exec_id.end())
      found = execs.find(e->second);
    // Another client's exec reads as no exec at all: a DELETE tells nobody
    // what others run.
    if (found == execs.end() || !may_cancel(found->second, who)) {
      srv->respond(req.id, error_response(404, "no_such_exec",
                                          "no exec in flight has the id '" + std::string(key) +
                                              "' (a client's id or an exec_id)"));
      return;
    }
    if (found->second.session.id.empty())
      caf::anon_send(actor, cancel_atom::value, req.id, found->second.exec_id, found->second.id);
    else
      caf::anon_send(actor, cancel_atom::value, req.id, found->second.exec_id, found->second.id,
                     found->second.session);
  }

  /// The client of `request_id` is gone: cancel its exec, if it has one.
  void on_abandoned(uint64_t request_id) {
    std::lock_guard<std::mutex> guard(m);
    if (auto f = files_jobs.find(request_id); f != files_jobs.end()) {
      if (f->second)
        caf::anon_send_exit(f->second, caf::exit_reason::user_shutdown);
      files_jobs.erase(f);
      return;
    }
    if (auto a = audit_streams.find(request_id); a != audit_streams.end()) {
      // Its actor unsubscribes as it exits.
      if (a->second.actor)
        caf::anon_send_exit(a->second.actor, caf::exit_reason::user_shutdown);
      audit_streams.erase(a);
      return;
    }
    auto it = execs.find(request_id);
    if (it != execs.end())
      send_cancel(it->second);
  }
};

void api_service::set_default_pool(std::string name) {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->default_pool = std::move(name);
}

void api_service::set_pool_policies(std::map<std::string, std::string> pool_policies) {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->pool_policies = std::move(pool_policies);
}

void api_service::replace_tokens(std::vector<token_entry> tokens) {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->access.replace(std::move(tokens));
  // A token is revoked because it should do nothing more: its execs in
  // flight, and the output they stream to it, end now rather than when
  // their timeout comes. The same for an exec in a pool its token may no
  // longer use. Their requests get their cancelled results, and release.
  for (const auto& kv : state_->execs) {
    const in_flight_exec& x = kv.second;
    if (x.owner.type == caller::kind::token &&
        (!state_->access.may_use(x.owner, x.pool) ||
         (!x.template_pool.empty() && !state_->access.may_use(x.owner, x.template_pool))))
      state_->send_cancel(x);
  }
  if (!state_->stopped)
    state_->end_streams_out_of_view();
}

outcome<std::unique_ptr<api_service>>
api_service::start(caf::actor_system& sys, supervisor_actor supervisor, api_options opts) {
  auto st = std::make_shared<state>();
  st->default_pool = opts.default_pool;
  st->pool_policies = std::move(opts.pool_policies);
  if (opts.tokens)
    st->access = access_control(std::move(*opts.tokens));
  st->sys = &sys;
  st->self = st;
  st->policy_dir = std::move(opts.policy_dir);
  st->supervisor = supervisor;
  st->audit_file = std::move(opts.audit_file);
  st->actor = spawn_api_actor(sys, std::move(supervisor), st);
  state* raw = st.get();
  http_server::callbacks cb;
  cb.on_request = [raw](http_request req) { raw->on_request(std::move(req)); };
  cb.on_abandoned = [raw](uint64_t id) { raw->on_abandoned(id); };
  // A file's upload may have more than the body limit of JSON requests,
  // for a caller the server admits: the head is judged before the body is
  // read, so no one else makes the daemon hold a large body.
  cb.large_body = [raw](const http_request& head) { return raw->may_upload(head); };
  auto server =
      http_server::start(opts.listen, opts.limits, std::move(cb), opts.socket_access, opts.tls);
  if (!server) {
    caf::anon_send_exit(st->actor, caf::exit_reason::user_shutdown);
    return server.error();
  }
  {
    std::lock_guard<std::mutex> guard(st->m);
    st->srv = server->get();
    st->server = std::move(*server);
  }
  std::unique_ptr<api_service> out(new api_service());
  out->state_ = std::move(st);
  return out;
}

api_service::~api_service() {
  stop();
}

const std::vector<listen_address>& api_service::bound() const {
  return state_->srv->bound();
}

void api_service::begin_drain() {
  std::lock_guard<std::mutex> guard(state_->m);
  state_->draining = true;
}

bool api_service::wait_idle(std::chrono::milliseconds grace) {
  std::unique_lock<std::mutex> lock(state_->m);
  return state_->idle_cv.wait_for(lock, grace, [this] { return state_->execs.empty(); });
}

std::size_t api_service::cancel_in_flight() {
  std::lock_guard<std::mutex> guard(state_->m);
  for (const auto& kv : state_->execs)
    state_->send_cancel(kv.second);
  return state_->execs.size();
}

std::size_t api_service::in_flight() const {
  std::lock_guard<std::mutex> guard(state_->m);
  return state_->execs.size();
}

void api_service::stop() {
  if (!state_)
    return;
  {
    std::lock_guard<std::mutex> guard(state_->m);
    if (state_->stopped)
      return;
    state_->stopped = true;
    // Audit streams never end by themselves: each gets its last event and
    // its end now, before the server closes (which writes what it was
    // handed first), and its actor an exit.
    for (auto& [id, a] : state_->audit_streams) {
      if (a.head_sent) {
        state_->srv->stream(id, sse_event("end", R"({"v":1,"reason":"the server stops"})"));
        state_->srv->end_stream(id);
      } else {
        state_->srv->respond(id, error_response(503, "draining", "the server stops"));
      }
      if (a.actor)
        caf::anon_send_exit(a.actor, caf::exit_reason::user_shutdown);
    }
    state_->audit_streams.clear();
  }
  // Outside the lock: the I/O thread takes it while it closes connections.
  // The server object stays (bound() reads it) until the state goes.
  state_->srv->stop();
  caf::anon_send_exit(state_->actor, caf::exit_reason::user_shutdown);
}

} // namespace castellan::api
