// Sessions over the API of a real `castellan serve` (docs/api.md,
// "Sessions"): what one exec of a session defines the next one sees, and
// another session does not; a session's exec streamed; a session belongs
// to the token that made it; a timeout or a cancel ends it; bad bodies name
// their field.

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <future>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/run_process.hpp"
#include "support/serve_process.hpp"

using castellan::test::http_client;
using castellan::test::http_reply;
using castellan::test::run_process;
using castellan::test::serve_process;
using json = nlohmann::json;

namespace {

/// `castellan token new FLAGS…`: the token and its tokens-file entry.
struct new_token {
  std::string token;
  std::string entry;
};

new_token make_token(const std::vector<std::string>& flags) {
  std::vector<std::string> argv = {castellan::test::castellan_cli(), "token", "new"};
  argv.insert(argv.end(), flags.begin(), flags.end());
  auto r = run_process(argv, {}, 60);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.err);
  std::string err = r.err;
  while (!err.empty() && err.back() == '\n')
    err.pop_back();
  return {err.substr(err.rfind('\n') + 1), r.out};
}

/// Writes `text` to `path` with `mode`.
void write_file(const std::string& path, const std::string& text, mode_t mode) {
  std::ofstream(path, std::ios::binary) << text;
  ::chmod(path.c_str(), mode);
}

/// A config for serve_process: two pools (`default`, `gpu`), the execs
/// audited to `state/audit.jsonl`, `tokens` as the tokens file, and no
/// workspace store.
std::vector<std::string> config_args(const std::string& dir, const std::string& tokens) {
  write_file(dir + "/tokens.toml", tokens, 0600);
  const std::string config = dir + "/castellan.toml";
  write_file(config,
             "state_dir = \"" + dir +
                 "/state\"\n"
                 "[auth]\ntokens_file = \"tokens.toml\"\n"
                 "[audit]\nfile = \"audit.jsonl\"\nevents = [\"exec_start\", \"exec_end\"]\n"
                 "fsync = \"every_record\"\n"
                 // Checked as a daemon without a store (the CLI's answers).
                 "[workspaces]\nenabled = false\n"
                 "[[pools]]\nname = \"default\"\nsize = 1\n"
                 "[[pools]]\nname = \"gpu\"\nsize = 1\n",
             0600);
  return {"--config", config};
}

/// A daemon with two tokens: `ci`, limited to the pool `default` and to one
/// exec at a time, and `ops`, unrestricted. Requests go over its unix
/// socket, with or without a token (a token sent there applies).
struct token_daemon {
  new_token ci = make_token({"--name", "ci", "--pools", "default", "--max-concurrent", "1"});
  new_token ops = make_token({"--name", "ops"});
  std::string dir = make_dir();
  serve_process serve{config_args(dir, ci.entry + "\n" + ops.entry), dir + "/api.sock"};

  token_daemon() {
    BOOST_REQUIRE(serve.first_line() == "castellan: listening on unix:" + serve.socket_path +
                                            "\n");
  }
  ~token_daemon() { std::system(("rm -rf '" + dir + "'").c_str()); }

  static std::string make_dir() {
    char tmpl[] = "/tmp/castellan-session-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    return tmpl;
  }

  /// One request as `token` ("": none).
  http_reply as(const std::string& token, const std::string& method, const std::string& target,
                const json& body = nullptr, const std::string& accept = {}) {
    http_client c(serve.socket_path);
    http_client::headers h;
    if (!token.empty())
      h.emplace_back("Authorization", "Bearer " + token);
    if (!accept.empty())
      h.emplace_back("Accept", accept);
    return c.request(method, target, body.is_null() ? std::string{} : body.dump(),
                     "application/json", h);
  }

  /// A new session of `token`; its id.
  std::string create(const std::string& token, const json& body = json::object()) {
    auto r = as(token, "POST", "/v1/sessions", body);
    BOOST_REQUIRE_MESSAGE(r.status == 201u, r.body);
    return r.json()["id"].get<std::string>();
  }
};

/// A daemon without tokens (serve_process's default pool of two workers).
struct plain_daemon {
  serve_process serve;
  plain_daemon() { BOOST_REQUIRE(!serve.first_line().empty()); }

  http_reply post(const std::string& target, const json& body) {
    http_client c(serve.socket_path);
    return c.post(target, body);
  }
  http_reply request(const std::string& method, const std::string& target) {
    http_client c(serve.socket_path);
    return c.request(method, target);
  }
  std::string create(const json& body = json::object()) {
    auto r = post("/v1/sessions", body);
    BOOST_REQUIRE_MESSAGE(r.status == 201u, r.body);
    return r.json()["id"].get<std::string>();
  }
  json exec(const std::string& id, const std::string& code) {
    auto r = post("/v1/sessions/" + id + "/exec", {{"code", code}});
    BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
    return r.json();
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cli_serve_session)

BOOST_AUTO_TEST_CASE(a_session_keeps_globals_cwd_and_env_and_another_session_does_not) {
  plain_daemon d;
  auto created = d.post("/v1/sessions", json::object());
  BOOST_REQUIRE_MESSAGE(created.status == 201u, created.body);
  const json info = created.json();
  const std::string a = info["id"];
  BOOST_TEST(info["v"] == 1);
  BOOST_TEST(info["pool"] == "default");
  BOOST_TEST(info["owner"] == "");
  BOOST_TEST(info["idle_ttl_ms"] == 600000);
  BOOST_TEST(info["max_lifetime_ms"] == 3600000);
  BOOST_TEST(info["created"].get<std::string>().back() == 'Z');

  auto first = d.exec(a, "x = 41\nimport os\nos.makedirs('/tmp/w', exist_ok=True)\n"
                         "os.chdir('/tmp/w')\nos.environ['SESSION_K'] = 'kept'");
  BOOST_TEST(first["error_class"] == "ok", first.dump());
  auto second = d.exec(a, "print(x + 1, os.getcwd(), os.environ['SESSION_K'])");
  BOOST_TEST(second["stdout"] == "42 /tmp/w kept\n", second.dump());
  // A request's env and cwd are applied and kept too.
  auto with_setup = d.post("/v1/sessions/" + a + "/exec",
                           {{"code", "pass"}, {"env", {{"FROM_REQ", "yes"}}}, {"cwd", "/tmp"}});
  BOOST_TEST(with_setup.status == 200u, with_setup.body);
  auto after = d.exec(a, "print(os.getcwd(), os.environ.get('FROM_REQ'))");
  BOOST_TEST(after["stdout"] == "/tmp yes\n", after.dump());
  // A command runs in the same root, cwd and environment.
  auto run = d.post("/v1/sessions/" + a + "/run",
                    {{"argv", {"/usr/bin/python3", "-c",
                               "import os; print(os.getcwd(), os.environ['SESSION_K'])"}}});
  BOOST_TEST(run.status == 200u, run.body);
  BOOST_TEST(run.json()["stdout"] == "/tmp kept\n", run.body);

  const std::string b = d.create();
  BOOST_TEST(b != a);
  auto other = d.exec(b, "print('x' in globals(), os.environ.get('SESSION_K') if 'os' in "
                         "globals() else __import__('os').environ.get('SESSION_K'))");
  BOOST_TEST(other["stdout"] == "False None\n", other.dump());

  // Both are listed, with their stats; /v1/exec is still stateless.
  auto listed = d.request("GET", "/v1/sessions");
  BOOST_TEST(listed.status == 200u);
  BOOST_TEST(listed.json()["sessions"].size() == 2u, listed.body);
  auto stats = d.request("GET", "/v1/sessions/" + a);
  BOOST_REQUIRE_MESSAGE(stats.status == 200u, stats.body);
  const json s = stats.json();
  BOOST_TEST(s["state"] == "ready");
  BOOST_TEST(s["execs"] == 5);
  BOOST_TEST(s["end_reason"] == "");
  BOOST_TEST(s["worker"]["memory_bytes"].get<uint64_t>() > 0u, stats.body);
  BOOST_TEST(s["worker"]["cpu_us"].get<uint64_t>() > 0u, stats.body);
  BOOST_TEST(s["worker"]["tasks"].get<uint64_t>() > 0u, stats.body);
  BOOST_TEST(!s["worker"].contains("pid"));
}

BOOST_AUTO_TEST_CASE(a_session_exec_streams_its_output) {
  plain_daemon d;
  const std::string id = d.create();
  d.exec(id, "greeting = 'hello'");
  http_client c(d.serve.socket_path);
  auto r = c.request("POST", "/v1/sessions/" + id + "/exec",
                     json{{"code", "print(greeting)\nimport sys\nprint('err', file=sys.stderr)"}}
                         .dump(),
                     "application/json", {{"Accept", "text/event-stream"}});
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.content_type == "text/event-stream; charset=utf-8");
  const auto out = r.body.find("event: stdout\ndata: {\"base64\":false,\"data\":\"hello\\n\"}");
  const auto err = r.body.find("event: stderr\ndata: {\"base64\":false,\"data\":\"err\\n\"}");
  const auto result = r.body.find("event: result\ndata: ");
  BOOST_TEST(out != std::string::npos, r.body);
  BOOST_TEST(err != std::string::npos, r.body);
  BOOST_REQUIRE(result != std::string::npos);
  BOOST_TEST(out < result);
  const auto data = r.body.substr(result + 20, r.body.find('\n', result + 20) - result - 20);
  BOOST_TEST(json::parse(data)["stdout"] == "hello\n");
  // A refusal before any output is the plain error, not a stream.
  http_client c2(d.serve.socket_path);
  auto refused = c2.request("POST", "/v1/sessions/s-0000000000000000/exec",
                           json{{"code", "1"}}.dump(), "application/json",
                           {{"Accept", "text/event-stream"}});
  BOOST_TEST(refused.status == 404u);
  BOOST_TEST(refused.error_code() == "no_such_session");
}

BOOST_AUTO_TEST_CASE(a_session_belongs_to_the_token_that_made_it) {
  token_daemon d;
  const std::string mine = d.create(d.ci.token);
  auto info = d.as(d.ci.token, "GET", "/v1/sessions/" + mine);
  BOOST_REQUIRE_MESSAGE(info.status == 200u, info.body);
  BOOST_TEST(info.json()["owner"] == "ci");
  BOOST_TEST(d.as(d.ci.token, "POST", "/v1/sessions/" + mine + "/exec", {{"code", "v = 7"}})
                 .status == 200u);

  // To another token it does not exist: it can neither see, run in nor
  // destroy it.
  for (const auto& [method, target, body] :
       std::vector<std::tuple<std::string, std::string, json>>{
           {"GET", "/v1/sessions/" + mine, nullptr},
           {"POST", "/v1/sessions/" + mine + "/exec", {{"code", "print(v)"}}},
           {"POST", "/v1/sessions/" + mine + "/run", {{"argv", {"/usr/bin/python3", "-V"}}}},
           {"DELETE", "/v1/sessions/" + mine, nullptr}}) {
    auto r = d.as(d.ops.token, method, target, body);
    BOOST_TEST(r.status == 404u, method << " " << target << ": " << r.body);
    BOOST_TEST(r.error_code() == "no_such_session", r.body);
    BOOST_TEST(r.error_message() == "no session '" + mine + "'");
  }
  // Still there, still its own.
  auto still = d.as(d.ci.token, "POST", "/v1/sessions/" + mine + "/exec", {{"code", "print(v)"}});
  BOOST_TEST(still.json()["stdout"] == "7\n", still.body);

  // ci is limited to `default`: not even a session from `gpu`.
  auto gpu = d.as(d.ci.token, "POST", "/v1/sessions", {{"pool", "gpu"}});
  BOOST_TEST(gpu.status == 403u, gpu.body);
  BOOST_TEST(gpu.error_code() == "pool_not_allowed");
  BOOST_TEST(gpu.body.find("\"field\":\"/pool\"") != std::string::npos, gpu.body);
  const std::string theirs = d.create(d.ops.token, {{"pool", "gpu"}});
  const std::string anonymous = d.create("");

  // ci lists its own; ops (no `pools`) and the socket's caller every one.
  auto ids = [](const http_reply& r) {
    std::vector<std::string> out;
    const json body = r.json();
    for (const auto& s : body["sessions"])
      out.push_back(s["id"].get<std::string>());
    std::sort(out.begin(), out.end());
    return out;
  };
  std::vector<std::string> all = {mine, theirs, anonymous};
  std::sort(all.begin(), all.end());
  auto ci_list = d.as(d.ci.token, "GET", "/v1/sessions");
  BOOST_TEST(ids(ci_list) == std::vector<std::string>{mine}, ci_list.body);
  auto ops_list = d.as(d.ops.token, "GET", "/v1/sessions");
  BOOST_TEST(ids(ops_list) == all, ops_list.body);
  auto socket_list = d.as("", "GET", "/v1/sessions");
  BOOST_TEST(ids(socket_list) == all, socket_list.body);
  // The socket's caller without a token reaches any session, as it may
  // cancel any exec.
  auto by_socket = d.as("", "POST", "/v1/sessions/" + mine + "/exec", {{"code", "print(v)"}});
  BOOST_TEST(by_socket.json()["stdout"] == "7\n", by_socket.body);
  // An exec in a session counts against its token's max_concurrent (1).
  auto sleeping = std::async(std::launch::async, [&] {
    return d.as(d.ci.token, "POST", "/v1/sessions/" + mine + "/exec",
                {{"code", "import time; time.sleep(2)"}, {"id", "nap"}});
  });
  castellan::test::wait_until(d.serve.socket_path, "/v1/status", [](const http_reply& r) {
    return r.status == 200 && r.json()["in_flight"] == 1;
  });
  auto second = d.as(d.ci.token, "POST", "/v1/exec", {{"code", "1"}});
  BOOST_TEST(second.status == 429u, second.body);
  BOOST_TEST(second.error_code() == "too_many_execs");
  BOOST_TEST(sleeping.get().status == 200u);

  // The owner destroys it: the final stats, then it is gone for everyone.
  auto gone = d.as(d.ci.token, "DELETE", "/v1/sessions/" + mine);
  BOOST_TEST(gone.status == 200u, gone.body);
  BOOST_TEST(gone.json()["id"] == mine);
  BOOST_TEST(gone.json()["execs"] == 4);

  // The session's execs are audited with its id as their pool, and the
  // token as their origin.
  const std::string audit_file = d.dir + "/state/audit.jsonl";
  bool found = false;
  for (int i = 0; i < 300 && !found; ++i) {
    std::ifstream in(audit_file);
    std::string line;
    while (std::getline(in, line)) {
      auto rec = json::parse(line, nullptr, false);
      auto text = [](const json& j, const char* key) {
        return j.is_object() && j.contains(key) && j[key].is_string() ? j[key].get<std::string>()
                                                                      : std::string{};
      };
      if (text(rec, "kind") == "exec_start" && text(rec, "pool") == mine &&
          rec.contains("origin") && text(rec["origin"], "token") == "ci")
        found = true;
    }
    if (!found)
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST(found, "no exec_start with pool " << mine << " and token ci in " << audit_file);
}

BOOST_AUTO_TEST_CASE(a_destroyed_session_is_gone) {
  plain_daemon d;
  const std::string id = d.create();
  auto gone = d.request("DELETE", "/v1/sessions/" + id);
  BOOST_REQUIRE_MESSAGE(gone.status == 200u, gone.body);
  BOOST_TEST(gone.json()["end_reason"] == "destroyed by its client", gone.body);
  for (const auto& target : {"/v1/sessions/" + id + "/exec", "/v1/sessions/" + id + "/run"}) {
    auto r = d.post(target, target.back() == 'c' ? json{{"code", "1"}}
                                                 : json{{"argv", {"/usr/bin/python3"}}});
    BOOST_TEST(r.status == 404u, r.body);
    BOOST_TEST(r.error_code() == "no_such_session");
  }
  BOOST_TEST(d.request("GET", "/v1/sessions/" + id).status == 404u);
  BOOST_TEST(d.request("DELETE", "/v1/sessions/" + id).status == 404u);
  BOOST_TEST(d.request("GET", "/v1/sessions").json()["sessions"].empty());
}

BOOST_AUTO_TEST_CASE(a_timeout_or_a_cancel_ends_the_session) {
  plain_daemon d;
  const std::string id = d.create();
  d.exec(id, "state = 1");
  auto timed_out = d.post("/v1/sessions/" + id + "/exec",
                          {{"code", "while True: pass"}, {"timeout_ms", 300}});
  BOOST_REQUIRE_MESSAGE(timed_out.status == 200u, timed_out.body);
  BOOST_TEST(timed_out.json()["error_class"] == "timeout");
  BOOST_TEST(timed_out.json()["exit_code"] == 124);
  BOOST_TEST(timed_out.json()["detail"].get<std::string>().find("session " + id +
                                                               " ended with its worker") !=
             std::string::npos);
  auto next = d.post("/v1/sessions/" + id + "/exec", {{"code", "print(state)"}});
  BOOST_TEST(next.status == 410u, next.body);
  BOOST_TEST(next.error_code() == "session_ended");
  BOOST_TEST(next.error_message().find("timeout") != std::string::npos, next.body);
  auto stats = d.request("GET", "/v1/sessions/" + id);
  BOOST_TEST(stats.json()["state"] == "ended", stats.body);

  // DELETE /v1/execs/{id} cancels an exec in a session, which ends it.
  const std::string other = d.create();
  auto running = std::async(std::launch::async, [&] {
    return d.post("/v1/sessions/" + other + "/exec",
                  {{"code", "import time; time.sleep(60)"}, {"id", "long-one"}});
  });
  castellan::test::wait_until(d.serve.socket_path, "/v1/sessions/" + other,
                              [](const http_reply& r) {
                                return r.status == 200 && r.json()["state"] == "running";
                              });
  auto cancel = d.request("DELETE", "/v1/execs/long-one");
  BOOST_TEST(cancel.status == 202u, cancel.body);
  BOOST_TEST(cancel.json()["cancelled"] == true, cancel.body);
  auto cancelled = running.get();
  BOOST_TEST(cancelled.json()["error_class"] == "cancelled", cancelled.body);
  BOOST_TEST(cancelled.json()["exit_code"] == 125);
  auto after = d.post("/v1/sessions/" + other + "/exec", {{"code", "1"}});
  BOOST_TEST(after.status == 410u, after.body);
  BOOST_TEST(after.error_code() == "session_ended");

  // So does a client that goes away before its exec is answered.
  const std::string third = d.create();
  {
    http_client leaving(d.serve.socket_path);
    leaving.send("POST", "/v1/sessions/" + third + "/exec",
                 json{{"code", "import time; time.sleep(60)"}}.dump());
    castellan::test::wait_until(d.serve.socket_path, "/v1/sessions/" + third,
                                [](const http_reply& r) {
                                  return r.status == 200 && r.json()["state"] == "running";
                                });
  }
  auto ended = castellan::test::wait_until(
      d.serve.socket_path, "/v1/sessions/" + third,
      [](const http_reply& r) { return r.status == 200 && r.json()["state"] == "ended"; });
  BOOST_TEST(ended.json()["end_reason"].get<std::string>().find("cancelled") != std::string::npos,
             ended.body);
}

BOOST_AUTO_TEST_CASE(bad_requests_name_their_field) {
  plain_daemon d;
  auto field_of = [](const http_reply& r) {
    auto j = json::parse(r.body, nullptr, false);
    return j.is_object() && j.contains("error") ? j["error"].value("field", "") : "";
  };
  struct bad {
    json body;
    std::string field;
  };
  for (const auto& b : std::vector<bad>{{{{"colour", "red"}}, "/colour"},
                                        {{{"pool", 3}}, "/pool"},
                                        {{{"pool", ""}}, "/pool"},
                                        {{{"idle_ttl_ms", 0}}, "/idle_ttl_ms"},
                                        {{{"idle_ttl_ms", "1s"}}, "/idle_ttl_ms"},
                                        {{{"max_lifetime_ms", -5}}, "/max_lifetime_ms"},
                                        {{{"idle_ttl_ms", 999999999999}}, "/idle_ttl_ms"},
                                        {{{"max_lifetime_ms", 999999999999}}, "/max_lifetime_ms"},
                                        {{{"workspace", "/etc"}}, "/workspace"}}) {
    auto r = d.post("/v1/sessions", b.body);
    BOOST_TEST(r.status == 400u, b.body.dump() << ": " << r.body);
    BOOST_TEST(r.error_code() == "invalid_field", r.body);
    BOOST_TEST(field_of(r) == b.field, r.body);
  }
  auto unknown_pool = d.post("/v1/sessions", {{"pool", "nope"}});
  BOOST_TEST(unknown_pool.status == 404u, unknown_pool.body);
  BOOST_TEST(unknown_pool.error_code() == "unknown_pool");
  BOOST_TEST(d.request("GET", "/v1/sessions").json()["sessions"].empty());

  const std::string id = d.create();
  for (const auto& b : std::vector<bad>{{{{"code", "1"}, {"pool", "default"}}, "/pool"},
                                        {{{"code", "1"}, {"policy", json::object()}}, "/policy"},
                                        {{{"code", 1}}, "/code"},
                                        {json::object(), "/code"},
                                        {{{"code", "1"}, {"colour", "red"}}, "/colour"},
                                        {{{"code", "1"}, {"timeout_ms", 0}}, "/timeout_ms"}}) {
    auto r = d.post("/v1/sessions/" + id + "/exec", b.body);
    BOOST_TEST(r.status == 400u, b.body.dump() << ": " << r.body);
    BOOST_TEST(field_of(r) == b.field, r.body);
  }
  auto run_pool = d.post("/v1/sessions/" + id + "/run", {{"argv", {"/bin/true"}}, {"pool", "x"}});
  BOOST_TEST(field_of(run_pool) == "/pool", run_pool.body);
  auto unknown_field = d.post("/v1/sessions/" + id + "/exec", {{"code", "1"}, {"x", 1}});
  BOOST_TEST(unknown_field.error_message() ==
                 "unknown field 'x' (expected code, id, timeout_ms, stdin, stdin_base64, env, "
                 "cwd, files_in, files_out)",
             unknown_field.body);
  // The session is untouched by what was refused.
  BOOST_TEST(d.exec(id, "print(1)")["stdout"] == "1\n");

  // Methods, media types and routes.
  auto wrong_method = d.request("PUT", "/v1/sessions");
  BOOST_TEST(wrong_method.status == 405u);
  BOOST_TEST(d.request("GET", "/v1/sessions/" + id + "/exec").status == 405u);
  BOOST_TEST(d.request("POST", "/v1/sessions/" + id).status == 405u);
  BOOST_TEST(d.request("GET", "/v1/sessions/" + id + "/nope").status == 404u);
  http_client c(d.serve.socket_path);
  auto form = c.request("POST", "/v1/sessions", "{}", "application/x-www-form-urlencoded");
  BOOST_TEST(form.status == 415u);
  // An empty body is `{}`.
  auto empty = c.request("POST", "/v1/sessions", "", "application/json");
  BOOST_TEST(empty.status == 201u, empty.body);
}

BOOST_AUTO_TEST_CASE(an_owner_holds_at_most_max_per_owner_sessions) {
  plain_daemon d;
  std::vector<std::future<http_reply>> made;
  for (int i = 0; i < 8; ++i)
    made.push_back(std::async(std::launch::async, [&] {
      return d.post("/v1/sessions", {{"idle_ttl_ms", 60000}});
    }));
  for (auto& f : made) {
    auto r = f.get();
    BOOST_TEST(r.status == 201u, r.body);
  }
  auto ninth = d.post("/v1/sessions", json::object());
  BOOST_TEST(ninth.status == 429u, ninth.body);
  BOOST_TEST(ninth.error_code() == "too_many_sessions", ninth.body);
}

BOOST_AUTO_TEST_CASE(the_cli_creates_runs_in_lists_and_removes_a_session) {
  plain_daemon d;
  const std::string target = "unix:" + d.serve.socket_path;
  auto cli = [&](std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), castellan::test::castellan_cli());
    args.insert(args.begin() + 3, {"--connect", target});
    return run_process(args, input, 60);
  };
  auto made = cli({"session", "create", "--idle-ttl", "5m"});
  BOOST_REQUIRE_MESSAGE(made.exit_code == 0, made.err);
  BOOST_REQUIRE(made.out.size() == 19u); // "s-" + 16 hex digits + '\n'
  const std::string id = made.out.substr(0, 18);

  auto first = cli({"session", "exec", id, "x = 41\nimport os\nos.chdir('/tmp')"});
  BOOST_TEST(first.exit_code == 0, first.err);
  BOOST_TEST(first.out == "");
  auto second = cli({"session", "exec", id, "print(x + 1, os.getcwd())"});
  BOOST_TEST(second.out == "42 /tmp\n", second.err);
  // Code from stdin; the code's exit code is the command's, its stderr too.
  auto from_stdin = cli({"session", "exec", id, "-"},
                        "import sys\nprint(x)\nprint('oops', file=sys.stderr)\nsys.exit(3)");
  BOOST_TEST(from_stdin.exit_code == 3);
  BOOST_TEST(from_stdin.out == "41\n");
  BOOST_TEST(from_stdin.err == "oops\n");
  auto json_out = cli({"session", "exec", "--json", id, "print(x)"});
  BOOST_TEST(nlohmann::json::parse(json_out.out)["stdout"] == "41\n", json_out.out);
  auto run = cli({"session", "run", id, "--", "/usr/bin/python3", "-c",
                  "import os; print(os.getcwd())"});
  BOOST_TEST(run.exit_code == 0, run.err);
  BOOST_TEST(run.out == "/tmp\n");

  auto ls = cli({"session", "ls"});
  BOOST_TEST(ls.exit_code == 0, ls.err);
  BOOST_TEST(ls.out.rfind(id + "  pool=default  owner=  created=", 0) == 0u, ls.out);
  auto ls_json = cli({"session", "ls", "--json"});
  BOOST_TEST(nlohmann::json::parse(ls_json.out)["sessions"][0]["id"] == id, ls_json.out);
  auto stats = cli({"session", "stats", id});
  BOOST_TEST(stats.exit_code == 0, stats.err);
  BOOST_TEST(stats.out.find("state: ready\n") != std::string::npos, stats.out);
  BOOST_TEST(stats.out.find("execs: 5\n") != std::string::npos, stats.out);
  BOOST_TEST(stats.out.find("idle TTL 300 s") != std::string::npos, stats.out);

  // A timeout ends the session: exit 124, then the daemon's refusal.
  auto timed_out = cli({"session", "exec", "--timeout", "300ms", id, "while True: pass"});
  BOOST_TEST(timed_out.exit_code == 124, timed_out.err);
  auto ended = cli({"session", "exec", id, "print(x)"});
  BOOST_TEST(ended.exit_code == 2);
  BOOST_TEST(ended.err.find("session " + id + " ended: its worker was killed by exec") !=
                 std::string::npos,
             ended.err);

  auto rm = cli({"session", "rm", id});
  BOOST_TEST(rm.exit_code == 0, rm.err);
  BOOST_TEST(rm.out == "");
  auto again = cli({"session", "rm", id});
  BOOST_TEST(again.exit_code == 2);
  BOOST_TEST(again.err == "castellan: the daemon refused the request: no session '" + id + "'\n");
  BOOST_TEST(cli({"session", "ls"}).out == "");
  auto bad_id = cli({"session", "stats", "../v1/pools"});
  BOOST_TEST(bad_id.exit_code == 2);
  BOOST_TEST(bad_id.err == "castellan session: '../v1/pools' is not a session id\n");
  // Workspaces: this daemon has no store.
  auto ws = cli({"workspace", "ls"});
  BOOST_TEST(ws.exit_code == 2);
  BOOST_TEST(ws.err == "castellan: the daemon refused the request: workspaces: this supervisor "
                       "has no workspace store\n");
  BOOST_TEST(cli({"workspace", "create", "data", "--quota", "8MiB"}).exit_code == 2);
  auto bad_quota = cli({"workspace", "create", "data", "--quota", "8MB"});
  BOOST_TEST(bad_quota.err == "castellan workspace create: --quota: '8MB' is not a size (e.g. "
                              "64MiB, 1GiB)\n");
  auto bad_name = cli({"workspace", "rm", "../x"});
  BOOST_TEST(bad_name.err == "castellan workspace rm: '../x' is not a workspace name\n");
  auto bad_pool = cli({"session", "create", "--pool", "nope"});
  BOOST_TEST(bad_pool.exit_code == 2);
  BOOST_TEST(bad_pool.err.find("no configured pool named 'nope'") != std::string::npos,
             bad_pool.err);
}

BOOST_AUTO_TEST_CASE(a_reload_that_takes_its_pool_from_a_token_stops_its_sessions_execs) {
  token_daemon d;
  const std::string busy = d.create(d.ci.token);
  const std::string idle = d.create(d.ci.token);
  BOOST_REQUIRE(d.as(d.ci.token, "POST", "/v1/sessions/" + idle + "/exec", {{"code", "v = 1"}})
                    .status == 200u);
  auto running = std::async(std::launch::async, [&] {
    return d.as(d.ci.token, "POST", "/v1/sessions/" + busy + "/exec",
                {{"code", "import time; time.sleep(60)"}});
  });
  castellan::test::wait_until(d.serve.socket_path, "/v1/sessions/" + busy,
                              [](const http_reply& r) {
                                return r.status == 200 && r.json()["state"] == "running";
                              });
  // ci keeps its token, but its pools are now `gpu` only.
  std::string narrowed = d.ci.entry;
  const auto at = narrowed.find("pools = [\"default\"]");
  BOOST_REQUIRE(at != std::string::npos);
  narrowed.replace(at, 19, "pools = [\"gpu\"]");
  write_file(d.dir + "/tokens.toml", narrowed + "\n" + d.ops.entry, 0600);
  BOOST_REQUIRE(::kill(d.serve.pid, SIGHUP) == 0);
  d.serve.wait_for_stderr_line("SIGHUP: reloaded");
  // The exec in flight is cancelled, which ends its session.
  auto cancelled = running.get();
  BOOST_TEST(cancelled.json()["error_class"] == "cancelled", cancelled.body);
  // The other session's execs are refused, as a new session from `default`.
  auto refused = d.as(d.ci.token, "POST", "/v1/sessions/" + idle + "/exec", {{"code", "print(v)"}});
  BOOST_TEST(refused.status == 403u, refused.body);
  BOOST_TEST(refused.error_code() == "pool_not_allowed");
  BOOST_TEST(refused.error_message() == "token 'ci' may no longer use pool 'default', which "
                                        "session '" + idle + "' was made from");
  auto create = d.as(d.ci.token, "POST", "/v1/sessions", json::object());
  BOOST_TEST(create.status == 403u, create.body);
  BOOST_TEST(create.error_code() == "pool_not_allowed");
}

BOOST_AUTO_TEST_SUITE_END()
