#include "actors/api/api_service.hpp"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <condition_variable>
#include <mutex>
#include <string_view>
#include <unordered_map>
#include <variant>

#include <caf/send.hpp>

#include "actors/api/api_actor.hpp"
#include "actors/api/api_error.hpp"
#include "actors/api/api_json.hpp"

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

} // namespace

struct api_service::state final : api_responder {
  caf::actor actor;
  http_server* srv = nullptr;          ///< the server, for its own I/O thread
  std::unique_ptr<http_server> server; ///< owned; stopped, never reset, by stop()

  mutable std::mutex m;
  std::condition_variable idle_cv;
  std::unordered_map<uint64_t, uint64_t> execs; ///< request id → exec id, under `m`
  uint64_t next_exec_id = 1;                    ///< under `m`
  bool draining = false;                        ///< under `m`
  bool stopped = false;                         ///< under `m`

  void complete(uint64_t request_id, http_response response) override {
    std::lock_guard<std::mutex> guard(m);
    if (execs.erase(request_id) != 0 && execs.empty())
      idle_cv.notify_all();
    if (!stopped && server)
      server->respond(request_id, std::move(response));
  }

  /// The routes; on the I/O thread.
  void on_request(http_request req) {
    const std::string_view target = req.target;
    const std::string_view path = target.substr(0, target.find('?'));
    if (req.tcp && !loopback_host(req.host)) {
      srv->respond(req.id, error_response(403, "forbidden_host",
                                          "the Host header '" + req.host +
                                              "' does not name a loopback address"));
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
        admit_exec(std::move(req), path == "/v1/run");
    } else if (path == "/v1/pools") {
      if (allow("GET"))
        caf::anon_send(actor, status_atom::value, req.id);
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
                                              " (POST /v1/exec, POST /v1/run, GET /v1/pools, "
                                              "GET /v1/health, GET /metrics)"));
    }
  }

  void admit_exec(http_request req, bool command) {
    // Refusing other media types keeps a web page from posting to a
    // loopback listener: a browser sends application/json only after a
    // CORS preflight, which this server never grants.
    if (!is_json_media_type(req.content_type)) {
      srv->respond(req.id, error_response(415, "unsupported_media_type",
                                          "Content-Type must be application/json, not '" +
                                              req.content_type + "'"));
      return;
    }
    auto parsed = parse_exec_body(req.body, command);
    if (auto* err = std::get_if<api_error>(&parsed)) {
      srv->respond(req.id, json_response(err->status, err->body()));
      return;
    }
    auto& er = std::get<exec_request>(parsed);
    {
      std::lock_guard<std::mutex> guard(m);
      if (draining) {
        srv->respond(req.id, error_response(503, "draining",
                                            "the server is shutting down and admits no new "
                                            "execs"));
        return;
      }
      // The API names every exec, so that a client that goes away can
      // have its exec cancelled.
      er.exec_id = next_exec_id++;
      execs.emplace(req.id, er.exec_id);
    }
    caf::anon_send(actor, exec_atom::value, req.id, std::move(er));
  }

  /// The client of `request_id` is gone: cancel its exec, if it has one.
  void on_abandoned(uint64_t request_id) {
    std::lock_guard<std::mutex> guard(m);
    auto it = execs.find(request_id);
    if (it != execs.end())
      caf::anon_send(actor, cancel_atom::value, it->second);
  }
};

outcome<std::unique_ptr<api_service>>
api_service::start(caf::actor_system& sys, supervisor_actor supervisor, api_options opts) {
  auto st = std::make_shared<state>();
  st->actor = spawn_api_actor(sys, std::move(supervisor), st);
  state* raw = st.get();
  http_server::callbacks cb;
  cb.on_request = [raw](http_request req) { raw->on_request(std::move(req)); };
  cb.on_abandoned = [raw](uint64_t id) { raw->on_abandoned(id); };
  auto server = http_server::start(opts.listen, opts.limits, std::move(cb));
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
    caf::anon_send(state_->actor, cancel_atom::value, kv.second);
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
  }
  // Outside the lock: the I/O thread takes it while it closes connections.
  // The server object stays (bound() reads it) until the state goes.
  state_->srv->stop();
  caf::anon_send_exit(state_->actor, caf::exit_reason::user_shutdown);
}

} // namespace castellan::api
