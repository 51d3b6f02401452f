#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <functional>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>

#include "actors/api/api_json.hpp"
#include "actors/api/api_service.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/http_client.hpp"
#include "support/process_scan.hpp"
#include "support/tcp_http.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace castellan::api;
using castellan::test::http_client;
using castellan::test::http_reply;
using json = nlohmann::json;

namespace {

/// A real supervisor with one pool of two sandboxed workers, behind the API
/// on a unix socket in a private directory.
struct api_fixture : test::actor_system_fixture {
  std::string dir;
  std::string socket_path;
  supervisor_actor sup;
  std::unique_ptr<api_service> api;

  api_fixture() {
    char tmpl[] = "/tmp/castellan-api-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    socket_path = dir + "/api.sock";
  }

  /// The audit the supervisor runs, if any (set before start()); its file
  /// is what GET /v1/audit?since= reads.
  std::optional<audit_config> audit;
  /// The supervisor's workspace store, if any (set before start()).
  std::optional<workspace_config> workspaces;

  void start(http_limits limits = {}, std::vector<listen_address> extra = {},
             const std::function<void(api_options&)>& tweak = {}) {
    supervisor_config sc;
    sc.pools.push_back(test_pool(2));
    sc.audit = audit;
    sc.workspaces = workspaces;
    auto s = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sup = *s;
    api_options opts;
    listen_address a;
    a.path = socket_path;
    opts.listen.push_back(a);
    for (auto& e : extra)
      opts.listen.push_back(e);
    opts.limits = limits;
    if (audit)
      opts.audit_file = audit->file;
    if (tweak)
      tweak(opts);
    auto started = api_service::start(sys, sup, std::move(opts));
    BOOST_REQUIRE_MESSAGE(started, (started ? "" : started.error().describe()));
    api = std::move(*started);
  }

  ~api_fixture() {
    if (api)
      api->stop();
    if (sup)
      caf::anon_send(sup, shutdown_atom::value);
    std::system(("rm -rf '" + dir + "'").c_str());
  }

  http_reply exec(const json& body) {
    http_client c(socket_path);
    return c.post("/v1/exec", body);
  }

  /// Asks the API until `done` holds for the answer to GET `target` (30 s
  /// safety net): waiting for a state, never for a duration.
  http_reply wait_until(const std::string& target,
                        const std::function<bool(const http_reply&)>& done) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    http_client c(socket_path);
    for (;;) {
      auto r = c.get(target);
      if (done(r))
        return r;
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "GET " << target << " never got there: " << r.body);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }

  /// The default pool's status once `done` holds for it.
  json wait_for_pool(const std::function<bool(const json&)>& done) {
    auto r = wait_until("/v1/pools", [&](const http_reply& x) {
      return x.status == 200 && done(x.json()["pools"][0]);
    });
    return r.json()["pools"][0];
  }

  static double metric(const std::string& text, const std::string& series) {
    auto pos = text.find("\n" + series + " ");
    if (pos == std::string::npos)
      return 0;
    return std::stod(text.substr(pos + series.size() + 2));
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(api_service_tests, api_fixture)

BOOST_AUTO_TEST_CASE(exec_answers_as_exec_json_prints_plus_v) {
  start();
  auto ok = exec({{"code", "print('hi')"}});
  BOOST_REQUIRE_MESSAGE(ok.status == 200u, ok.body);
  auto j = ok.json();
  BOOST_TEST(j["v"] == 1);
  BOOST_TEST(j["stdout"] == "hi\n");
  BOOST_TEST(j["exit_code"] == 0);
  BOOST_TEST(j["error_class"] == "ok");
  BOOST_TEST(j["exec_id"].get<uint64_t>() != 0u);
  for (const char* key : {"stderr", "stdout_truncated", "stderr_truncated", "exception", "events",
                          "timing", "usage", "worker_id", "detail"})
    BOOST_TEST(j.contains(key), key);

  auto ex = exec({{"code", "raise ValueError('nope')"}});
  BOOST_REQUIRE(ex.status == 200u);
  BOOST_TEST(ex.json()["error_class"] == "exception");
  BOOST_TEST(ex.json()["exception"]["type"] == "ValueError");
  BOOST_TEST(ex.json()["exception"]["message"] == "nope");

  // stdin (as text and as base64), env and cwd reach the code; output that
  // is not UTF-8 comes back as base64 with its flag.
  auto setup = exec({{"code", "import os, sys\n"
                              "data = sys.stdin.buffer.read()\n"
                              "sys.stdout.buffer.write(data[::-1])\n"
                              "print(os.environ['K'], os.getcwd(), file=sys.stderr)"},
                     {"stdin_base64", "AP8BYQ=="},
                     {"env", {{"K", "v"}}},
                     {"cwd", "/usr"}});
  BOOST_REQUIRE_MESSAGE(setup.status == 200u, setup.body);
  BOOST_TEST(setup.json()["stdout_base64"] == true);
  BOOST_TEST(setup.json()["stdout"] == "YQH/AA==", setup.body); // "a\x01\xff\x00"
  BOOST_TEST(setup.json()["stderr_base64"] == false);
  BOOST_TEST(setup.json()["stderr"] == "v /usr\n");
  auto text = exec({{"code", "print(input().upper())"}, {"stdin", "caf\u00e9\n"}});
  BOOST_TEST(text.json()["stdout"] == "CAF\u00c9\n", text.body);

  // Files in before the code, files out after it, as JSON.
  auto files = exec({{"code", "data = open('in.bin', 'rb').read()\n"
                              "open('out.bin', 'wb').write(data[::-1])\n"
                              "open('out.txt', 'w').write('text')"},
                     {"files_in", {{{"path", "in.bin"}, {"content_base64", "AP8BYQ=="}}}},
                     {"files_out", {"out.bin", "out.txt", "none"}}});
  BOOST_REQUIRE_MESSAGE(files.status == 200u, files.body);
  auto fj = files.json()["files"];
  BOOST_TEST(fj[0]["content_base64"] == "YQH/AA==", files.body);
  BOOST_TEST(fj[0]["size"] == 4);
  BOOST_TEST(fj[1]["content"] == "text", files.body);
  BOOST_TEST(fj[2]["error"] == "missing", files.body);
  auto bad_path = exec({{"code", "1"}, {"files_out", {"/etc/passwd"}}});
  BOOST_TEST(bad_path.status == 400u);
  BOOST_TEST(bad_path.json()["error"]["field"] == "/files_out/0", bad_path.body);

  auto slow = exec({{"code", "import time; time.sleep(60)"}, {"timeout_ms", 300}});
  BOOST_REQUIRE(slow.status == 200u);
  BOOST_TEST(slow.json()["error_class"] == "timeout");
  BOOST_TEST(slow.json()["exit_code"] == 124);
}

BOOST_AUTO_TEST_CASE(run_executes_a_command_the_pools_policy_allows) {
  start();
  http_client c(socket_path);
  auto r = c.post("/v1/run", {{"argv", {"/usr/bin/python3", "-c", "print(6*7)"}}});
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["stdout"] == "42\n");
  auto piped = c.post("/v1/run", {{"argv", {"/usr/bin/python3", "-c",
                                            "import os, sys; print(sys.stdin.read() + os.environ['V'])"}},
                                  {"stdin", "in+"},
                                  {"env", {{"V", "env"}}}});
  BOOST_REQUIRE_MESSAGE(piped.status == 200u, piped.body);
  BOOST_TEST(piped.json()["stdout"] == "in+env\n", piped.body);
  auto bad = c.post("/v1/run", {{"argv", json::array()}});
  BOOST_TEST(bad.status == 400u);
  BOOST_TEST(bad.json()["error"]["field"] == "/argv");
  auto code = c.post("/v1/run", {{"code", "1"}});
  BOOST_TEST(code.status == 400u);
  BOOST_TEST(code.json()["error"]["field"] == "/code");
}

BOOST_AUTO_TEST_CASE(bad_requests_get_4xx_naming_the_problem_and_the_server_stays_up) {
  http_limits limits;
  limits.body_bytes = 4096;
  start(limits);
  http_client c(socket_path);
  auto bad_json = c.request("POST", "/v1/exec", "{\"code\": ");
  BOOST_TEST(bad_json.status == 400u);
  BOOST_TEST(bad_json.error_code() == "bad_json");
  BOOST_TEST(bad_json.error_message().find("column 10") != std::string::npos, bad_json.body);

  auto not_utf8 = c.request("POST", "/v1/exec", "{\"code\": \"print('\xff')\"}");
  BOOST_TEST(not_utf8.status == 400u);
  BOOST_TEST(not_utf8.error_code() == "bad_json");
  BOOST_TEST(not_utf8.error_message().find("ill-formed UTF-8") != std::string::npos, not_utf8.body);

  auto not_object = c.request("POST", "/v1/exec", "[1]");
  BOOST_TEST(not_object.status == 400u);
  BOOST_TEST(not_object.error_message().find("array, not an object") != std::string::npos);

  auto unknown = c.post("/v1/exec", {{"code", "1"}, {"uploads", 1}});
  BOOST_TEST(unknown.status == 400u);
  BOOST_TEST(unknown.json()["error"]["field"] == "/uploads");
  BOOST_TEST(unknown.error_message().find("unknown field 'uploads'") != std::string::npos);

  auto wrong_type = c.post("/v1/exec", {{"code", 5}});
  BOOST_TEST(wrong_type.status == 400u);
  BOOST_TEST(wrong_type.error_message() == "'code' must be a string, not number");

  auto missing = c.post("/v1/exec", {{"pool", "default"}});
  BOOST_TEST(missing.status == 400u);
  BOOST_TEST(missing.error_message() == "the field 'code' is missing");

  auto timeout = c.post("/v1/exec", {{"code", "1"}, {"timeout_ms", -5}});
  BOOST_TEST(timeout.status == 400u);
  BOOST_TEST(timeout.json()["error"]["field"] == "/timeout_ms");

  auto cwd = c.post("/v1/exec", {{"code", "1"}, {"cwd", "relative"}});
  BOOST_TEST(cwd.status == 400u);
  BOOST_TEST(cwd.json()["error"]["field"] == "/cwd");
  BOOST_TEST(cwd.error_message() == "cwd: 'relative' is not an absolute path");

  auto pool = c.post("/v1/exec", {{"code", "1"}, {"pool", "nope"}});
  BOOST_TEST(pool.status == 404u);
  BOOST_TEST(pool.error_code() == "unknown_pool");
  BOOST_TEST(pool.error_message().find("no pool named 'nope'") != std::string::npos);

  auto policy = c.post("/v1/exec", {{"code", "1"}, {"policy", {{"version", 99}}}});
  BOOST_TEST(policy.status == 400u, policy.body);
  BOOST_TEST(policy.json()["error"]["field"] == "/policy");

  auto media = c.request("POST", "/v1/exec", R"({"code":"1"})", "text/plain");
  BOOST_TEST(media.status == 415u);
  BOOST_TEST(media.error_code() == "unsupported_media_type");

  auto route = c.get("/v2/exec");
  BOOST_TEST(route.status == 404u);
  BOOST_TEST(route.error_code() == "not_found");
  auto method = c.get("/v1/exec");
  BOOST_TEST(method.status == 405u);
  BOOST_TEST(method.error_code() == "method_not_allowed");

  {
    // 413 closes the connection: a fresh one.
    http_client big(socket_path);
    auto too_large = big.post("/v1/exec", {{"code", std::string(5000, '#')}});
    BOOST_TEST(too_large.status == 413u);
    BOOST_TEST(too_large.error_code() == "body_too_large");
  }
  // Still serving, on the same keep-alive connection as the errors above.
  auto health = c.get("/v1/health");
  BOOST_TEST(health.status == 200u);
  BOOST_TEST(health.json()["status"] == "ok");
  BOOST_TEST(c.post("/v1/exec", {{"code", "print(1)"}}).json()["stdout"] == "1\n");
}

BOOST_AUTO_TEST_CASE(deeply_nested_json_is_refused_without_harm) {
  start();
  http_client c(socket_path);
  const std::size_t depth = 500000;
  auto r = c.request("POST", "/v1/exec", std::string(depth, '[') + std::string(depth, ']'));
  BOOST_TEST(r.status == 400u);
  BOOST_TEST(r.error_code() == "bad_json");
  BOOST_TEST(c.get("/v1/health").status == 200u);
}

BOOST_AUTO_TEST_CASE(a_deeply_nested_request_policy_is_refused_without_harm) {
  start();
  http_client c(socket_path);
  // Dumping this policy for the supervisor recursed once per level: a
  // million levels overflowed the daemon's stack.
  const std::size_t depth = 1000000;
  const std::string body = R"({"code":"1","policy":{"a":)" + std::string(depth, '[') +
                           std::string(depth, ']') + "}}";
  for (const char* route : {"/v1/exec", "/v1/policies/check", "/v1/policies/explain"}) {
    auto r = c.request("POST", route, route == std::string("/v1/exec") ? body
                                      : R"({"policy":{"a":)" + std::string(depth, '[') +
                                            std::string(depth, ']') + "}}");
    BOOST_TEST(r.status == 400u, route);
    BOOST_TEST(r.error_code() == "bad_json", route);
  }
  BOOST_TEST(c.get("/v1/health").status == 200u);
}

BOOST_AUTO_TEST_CASE(policies_are_checked_and_explained_over_http) {
  start();
  http_client c(socket_path);
  auto ok = c.post("/v1/policies/check", {{"policy", {{"version", 1}, {"extends", {"strict"}}}}});
  BOOST_REQUIRE_MESSAGE(ok.status == 200u, ok.body);
  BOOST_TEST(ok.json()["valid"] == true);
  auto bad = c.post("/v1/policies/check", {{"policy", {{"version", "one"}}}});
  BOOST_TEST(bad.status == 200u);
  BOOST_TEST(bad.json()["valid"] == false);
  BOOST_TEST(bad.json()["errors"][0]["pointer"] == "/version");
  auto path = c.post("/v1/policies/check",
                     {{"policy", {{"version", 1}, {"extends", {"/etc/passwd"}}}}});
  BOOST_TEST(path.status == 400u);
  BOOST_TEST(path.json()["error"]["field"] == "/policy/extends/0");
  auto e = c.post("/v1/policies/explain", {{"name", "strict"}, {"exec", "/usr/bin/id"}});
  BOOST_REQUIRE_MESSAGE(e.status == 200u, e.body);
  BOOST_TEST(e.json()["decisions"][0]["decision"] == "deny");
  auto unknown = c.post("/v1/policies/explain", {{"name", "nope"}, {"exec", "/usr/bin/id"}});
  BOOST_TEST(unknown.status == 404u);
  BOOST_TEST(unknown.error_code() == "unknown_policy");
  auto media = c.request("POST", "/v1/policies/check", R"({"policy":{}})", "text/plain");
  BOOST_TEST(media.status == 415u);
  BOOST_TEST(c.get("/v1/policies/check").status == 405u);
  // Many at once are all answered, each on its own.
  std::vector<std::future<http_reply>> replies;
  for (int i = 0; i < 16; ++i)
    replies.push_back(std::async(std::launch::async, [this, i] {
      http_client h(socket_path);
      return h.post("/v1/policies/explain",
                    {{"name", "strict"}, {"fs", "read_file:/tmp/" + std::to_string(i)}});
    }));
  for (int i = 0; i < 16; ++i) {
    auto r = replies[static_cast<std::size_t>(i)].get();
    BOOST_REQUIRE(r.status == 200u);
    BOOST_TEST(r.json()["decisions"][0]["query"] == "read_file:/tmp/" + std::to_string(i));
  }
  BOOST_TEST(c.get("/v1/health").status == 200u);
}

BOOST_AUTO_TEST_CASE(pools_and_metrics) {
  start();
  auto pool = wait_for_pool([](const json& p) { return p["idle"] == 2; });
  BOOST_TEST(pool["name"] == "default");
  BOOST_TEST(pool["size"] == 2);
  BOOST_TEST(exec({{"code", "print(1)"}}).status == 200u);
  const std::string series = R"(castellan_execs_total{error_class="ok",pool="default"})";
  auto m = wait_until("/metrics", [&](const http_reply& r) { return metric(r.body, series) >= 1; });
  BOOST_TEST(m.status == 200u);
  BOOST_TEST(m.content_type == "text/plain; version=0.0.4; charset=utf-8");
  BOOST_TEST(m.body.find("# TYPE castellan_execs_total counter") != std::string::npos);
  auto after = wait_for_pool([](const json& p) { return p["completed"] >= 1; });
  BOOST_TEST(after["completed"] == 1);
}

BOOST_AUTO_TEST_CASE(status_says_what_the_daemon_is_doing_in_numbers) {
  start();
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  BOOST_TEST(exec({{"code", "print(1)"}}).status == 200u);
  auto running = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(120)"}, {"id", "slow"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  // The finished exec reaches telemetry on its own time: wait for it.
  auto r = wait_until("/v1/status", [](const http_reply& x) {
    return x.status == 200 && x.json()["summary"]["execs"]["total"] == 1;
  });
  auto j = r.json();
  BOOST_TEST(j["v"] == 1);
  BOOST_TEST(j["version"] == std::string(castellan_version()));
  BOOST_TEST(!castellan_version().empty());
  BOOST_TEST(j["draining"] == false);
  BOOST_TEST(j["uptime_ms"].is_number_unsigned());
  BOOST_TEST(j["in_flight"] == 1);
  BOOST_TEST(j["connections"].get<uint64_t>() >= 2u); // this client and the running exec's
  BOOST_REQUIRE(j["pools"].size() == 1u);
  BOOST_TEST(j["pools"][0]["name"] == "default");
  BOOST_TEST(j["pools"][0]["busy"] == 1);
  const auto& sum = j["summary"];
  BOOST_TEST(sum["execs"]["by_class"]["ok"] == 1);
  BOOST_TEST(sum["latency_us"]["run"]["p50"].get<uint64_t>() > 0u);
  BOOST_TEST(sum["workers"]["spawned"].get<uint64_t>() >= 2u);
  for (const char* key : {"syscalls", "audit"})
    BOOST_TEST(sum.contains(key), key);
  // Every figure is a number, no text.
  BOOST_TEST(sum["execs"]["per_second"].is_number());
  BOOST_TEST(sum["syscalls"]["latency_us"]["p99"].is_number());

  http_client c(socket_path);
  BOOST_TEST(c.request("DELETE", "/v1/execs/slow").status == 202u);
  BOOST_TEST(running.get().json()["error_class"] == "cancelled");
  api->begin_drain();
  auto drained = c.get("/v1/status").json();
  BOOST_TEST(drained["draining"] == true);
  BOOST_TEST(drained["in_flight"] == 0);
  BOOST_TEST(c.request("POST", "/v1/status", "{}").status == 405u);
}

BOOST_AUTO_TEST_CASE(eight_concurrent_requests_on_two_workers_are_all_answered) {
  start();
  std::vector<std::future<http_reply>> replies;
  for (int i = 0; i < 8; ++i)
    replies.push_back(std::async(std::launch::async, [this, i] {
      return exec({{"code", "import time; time.sleep(0.1); print(" + std::to_string(i) + ")"}});
    }));
  for (int i = 0; i < 8; ++i) {
    auto r = replies[static_cast<std::size_t>(i)].get();
    BOOST_TEST_CONTEXT("request " << i) {
      BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
      BOOST_TEST(r.json()["stdout"] == std::to_string(i) + "\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_client_that_disconnects_has_its_exec_cancelled) {
  start();
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  {
    http_client c(socket_path);
    c.send("POST", "/v1/exec", json{{"code", "import time; time.sleep(120)"}}.dump());
    wait_for_pool([](const json& p) { return p["busy"] == 1; });
    BOOST_TEST(api->in_flight() == 1u);
  }
  // Closed: the exec is cancelled (its worker killed) and the pool whole again.
  const std::string series = R"(castellan_execs_total{error_class="cancelled",pool="default"})";
  wait_until("/metrics", [&](const http_reply& r) { return metric(r.body, series) == 1; });
  auto pool = wait_for_pool([](const json& p) { return p["idle"] == 2 && p["busy"] == 0; });
  BOOST_TEST(pool["completed"] == 1);
  BOOST_TEST(api->in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(drain_finishes_execs_in_flight_and_refuses_new_ones) {
  start();
  auto running = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(0.5); print('finished')"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  api->begin_drain();
  auto refused = exec({{"code", "print(1)"}});
  BOOST_TEST(refused.status == 503u);
  BOOST_TEST(refused.error_code() == "draining");
  http_client c(socket_path);
  BOOST_TEST(c.get("/v1/health").json()["status"] == "draining");
  // What only reads still answers.
  BOOST_TEST(c.get("/v1/pools").status == 200u);
  BOOST_TEST(c.get("/metrics").status == 200u);
  BOOST_TEST(api->wait_idle(std::chrono::seconds(30)));
  auto done = running.get();
  BOOST_REQUIRE(done.status == 200u);
  BOOST_TEST(done.json()["stdout"] == "finished\n");
  BOOST_TEST(api->cancel_in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(cancel_in_flight_ends_what_the_grace_did_not) {
  start();
  auto running = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(120)"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  api->begin_drain();
  BOOST_TEST(!api->wait_idle(std::chrono::milliseconds(0)));
  BOOST_TEST(api->cancel_in_flight() == 1u);
  BOOST_TEST(api->wait_idle(std::chrono::seconds(30)));
  auto r = running.get();
  BOOST_REQUIRE(r.status == 200u);
  BOOST_TEST(r.json()["error_class"] == "cancelled");
  BOOST_TEST(r.json()["exit_code"] == 125);
}

BOOST_AUTO_TEST_CASE(tcp_requests_must_name_a_loopback_host) {
  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  start({}, {lo});
  const uint16_t port = api->bound()[1].port;
  namespace net = boost::asio;
  namespace http = boost::beast::http;
  auto get = [&](const std::string& host) {
    net::io_context io;
    net::ip::tcp::socket sock(io);
    sock.connect({net::ip::make_address("127.0.0.1"), port});
    http::request<http::string_body> req{http::verb::get, "/v1/health", 11};
    req.set(http::field::host, host);
    http::write(sock, req);
    boost::beast::flat_buffer buf;
    http::response<http::string_body> res;
    http::read(sock, buf, res);
    return res.result_int();
  };
  BOOST_TEST(get("127.0.0.1:" + std::to_string(port)) == 200u);
  BOOST_TEST(get("localhost") == 200u);
  BOOST_TEST(get("attacker.example:" + std::to_string(port)) == 403u);
  BOOST_TEST(get("127.0.0.1.attacker.example") == 403u);
}

// -- DELETE /v1/execs/{id} ----------------------------------------------------

BOOST_AUTO_TEST_CASE(delete_cancels_an_exec_by_its_clients_id_and_the_id_is_free_again) {
  start();
  auto running = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(120)"}, {"id", "job-1"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  http_client c(socket_path);
  // The id is taken while the exec is in flight.
  auto dup = c.post("/v1/exec", {{"code", "print(1)"}, {"id", "job-1"}});
  BOOST_TEST(dup.status == 409u);
  BOOST_TEST(dup.error_code() == "duplicate_id");
  BOOST_TEST(dup.json()["error"]["field"] == "/id");

  auto del = c.request("DELETE", "/v1/execs/job-1");
  BOOST_REQUIRE_MESSAGE(del.status == 202u, del.body);
  BOOST_TEST(del.json()["cancelled"] == true);
  BOOST_TEST(del.json()["outcome"] == "cancelled_running");
  BOOST_TEST(del.json()["id"] == "job-1");
  auto r = running.get();
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "cancelled");
  BOOST_TEST(r.json()["exit_code"] == 125);
  BOOST_TEST(r.json()["id"] == "job-1");
  BOOST_TEST(r.json()["exec_id"] == del.json()["exec_id"]);

  // Answered: nothing in flight has that id any more, and it may be used again.
  auto gone = c.request("DELETE", "/v1/execs/job-1");
  BOOST_TEST(gone.status == 404u);
  BOOST_TEST(gone.error_code() == "no_such_exec");
  auto again = c.post("/v1/exec", {{"code", "print('again')"}, {"id", "job-1"}});
  BOOST_REQUIRE_MESSAGE(again.status == 200u, again.body);
  BOOST_TEST(again.json()["stdout"] == "again\n");
  BOOST_TEST(again.json()["id"] == "job-1");
  BOOST_TEST(again.json()["exec_id"] != r.json()["exec_id"]);
  // An exec without an id has none in its result.
  BOOST_TEST(!exec({{"code", "print(1)"}}).json().contains("id"));
}

BOOST_AUTO_TEST_CASE(delete_takes_the_numeric_exec_id_too_and_cancels_a_queued_exec) {
  start();
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  // A fresh API numbers its execs from 1: the first two hold both workers,
  // the third waits in the queue.
  std::vector<std::future<http_reply>> replies;
  for (int i = 0; i < 2; ++i) {
    replies.push_back(std::async(std::launch::async, [this] {
      return exec({{"code", "import time; time.sleep(120)"}});
    }));
    wait_for_pool([i](const json& p) { return p["busy"] == i + 1; });
  }
  auto queued = std::async(std::launch::async, [this] {
    return exec({{"code", "print(3)"}, {"id", "third"}});
  });
  wait_for_pool([](const json& p) { return p["queued"] == 1; });
  http_client c(socket_path);
  auto q = c.request("DELETE", "/v1/execs/third");
  BOOST_REQUIRE_MESSAGE(q.status == 202u, q.body);
  BOOST_TEST(q.json()["outcome"] == "cancelled_queued");
  BOOST_TEST(q.json()["exec_id"] == 3);
  auto third = queued.get();
  BOOST_TEST(third.json()["error_class"] == "cancelled");
  BOOST_TEST(third.json()["id"] == "third");
  for (uint64_t exec_id : {1u, 2u}) {
    auto d = c.request("DELETE", "/v1/execs/" + std::to_string(exec_id));
    BOOST_REQUIRE_MESSAGE(d.status == 202u, d.body);
    BOOST_TEST(d.json()["cancelled"] == true);
    BOOST_TEST(d.json()["exec_id"] == exec_id);
    BOOST_TEST(!d.json().contains("id"));
  }
  for (auto& f : replies) {
    auto r = f.get();
    BOOST_TEST(r.json()["error_class"] == "cancelled");
  }
  // Nothing in flight: by number, by name, out of range, not a number.
  for (const char* key : {"1", "3", "third", "99999999999999999999999", "x"}) {
    auto d = c.request("DELETE", std::string("/v1/execs/") + key);
    BOOST_TEST(d.status == 404u, key);
    BOOST_TEST(d.error_code() == "no_such_exec", key);
  }
  auto method = c.get("/v1/execs/1");
  BOOST_TEST(method.status == 405u);
  BOOST_TEST(method.error_code() == "method_not_allowed");
  for (const char* target : {"/v1/execs/", "/v1/execs", "/v1/execs/a/b"}) {
    auto d = c.request("DELETE", target);
    BOOST_TEST(d.status == 404u, target);
    BOOST_TEST(d.error_code() == "not_found", target);
  }
}

BOOST_AUTO_TEST_CASE(two_deletes_cancel_once) {
  start();
  auto running = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(120)"}, {"id", "twice"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  // Two clients at once: one cancels it, the other finds it cancelled
  // (202, cancelled false) or already answered (404).
  auto del = [this] {
    http_client c(socket_path);
    return c.request("DELETE", "/v1/execs/twice");
  };
  auto a = std::async(std::launch::async, del);
  auto b = std::async(std::launch::async, del);
  int cancelled = 0;
  for (auto* f : {&a, &b}) {
    auto d = f->get();
    BOOST_TEST_INFO(d.body);
    BOOST_TEST((d.status == 202u || d.status == 404u));
    if (d.status == 202u && d.json()["cancelled"] == true)
      ++cancelled;
    if (d.status == 202u && d.json()["cancelled"] == false)
      BOOST_TEST(d.json()["outcome"] == "already_finished");
  }
  BOOST_TEST(cancelled == 1);
  BOOST_TEST(running.get().json()["error_class"] == "cancelled");
}

BOOST_AUTO_TEST_CASE(a_delete_racing_the_end_of_its_exec_agrees_with_the_result) {
  start();
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  // An exec that ends as the DELETE arrives. Whichever wins, the answers
  // agree: a DELETE that cancelled goes with a `cancelled` result, one
  // that did not (too early: 404, too late: 404 or cancelled false) with
  // the exec's own.
  int won = 0;
  int lost = 0;
  for (int i = 0; i < 20; ++i) {
    // Each round starts on an idle worker (a cancel costs the pool one).
    wait_for_pool([](const json& p) { return p["idle"] == 2; });
    http_client runner(socket_path);
    runner.send(
        "POST", "/v1/exec",
        json{{"code", "import time; time.sleep(0.005); print('done')"}, {"id", "race"}}.dump());
    http_client deleter(socket_path);
    // Spread the DELETE's moment over the exec's life (not a check on time:
    // every outcome is right, as long as the two answers agree).
    std::this_thread::sleep_for(std::chrono::microseconds(4000 * i));
    auto d = deleter.request("DELETE", "/v1/execs/race");
    auto r = runner.read();
    BOOST_TEST_CONTEXT("round " << i << ": " << d.body << " / " << r.body) {
      BOOST_REQUIRE(r.status == 200u);
      BOOST_REQUIRE((d.status == 202u || d.status == 404u));
      const bool cancelled = d.status == 202u && d.json()["cancelled"] == true;
      if (cancelled) {
        ++won;
        BOOST_TEST(r.json()["error_class"] == "cancelled");
      } else {
        ++lost;
        BOOST_TEST(r.json()["error_class"] == "ok");
        BOOST_TEST(r.json()["stdout"] == "done\n");
      }
      if (d.status == 202u)
        BOOST_TEST(d.json()["exec_id"] == r.json()["exec_id"]);
    }
  }
  BOOST_TEST_MESSAGE("DELETE won " << won << " and lost " << lost << " of 20 races");
  BOOST_TEST(won + lost == 20);
  // Whatever happened, every worker came back.
  wait_for_pool([](const json& p) { return p["idle"] == 2 && p["busy"] == 0; });
}

BOOST_AUTO_TEST_CASE(a_delete_never_reaches_the_next_exec_that_takes_the_id) {
  start();
  auto first = exec({{"code", "print(1)"}, {"id", "reused"}});
  BOOST_REQUIRE_MESSAGE(first.status == 200u, first.body);
  const auto first_id = first.json()["exec_id"].get<uint64_t>();
  auto second = std::async(std::launch::async, [this] {
    return exec({{"code", "import time; time.sleep(120)"}, {"id", "reused"}});
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  http_client c(socket_path);
  // By the first one's number: it is not in flight, and the second is left alone.
  auto stale = c.request("DELETE", "/v1/execs/" + std::to_string(first_id));
  BOOST_TEST(stale.status == 404u);
  BOOST_TEST(api->in_flight() == 1u);
  // By the name: the exec in flight now, the second.
  auto d = c.request("DELETE", "/v1/execs/reused");
  BOOST_REQUIRE_MESSAGE(d.status == 202u, d.body);
  BOOST_TEST(d.json()["exec_id"] != first_id);
  auto r = second.get();
  BOOST_TEST(r.json()["error_class"] == "cancelled");
  BOOST_TEST(r.json()["exec_id"] == d.json()["exec_id"]);
}

BOOST_AUTO_TEST_CASE(tokens_on_tcp_and_on_the_unix_socket) {
  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  auto entry = [](std::string name, const std::string& secret,
                  std::optional<std::vector<std::string>> pools, uint32_t max) {
    token_entry e;
    e.name = std::move(name);
    e.sha256 = digest_of(secret);
    e.pools = std::move(pools);
    e.max_concurrent = max;
    return e;
  };
  start({}, {lo}, [&](api_options& o) {
    o.default_pool = "default";
    o.tokens = std::vector<token_entry>{
        entry("ci", "cst_ci", std::vector<std::string>{"default"}, 1),
        entry("other", "cst_other", std::vector<std::string>{"elsewhere"}, 0)};
  });
  const uint16_t port = api->bound()[1].port;
  using test::tcp_request;
  const test::header_list ci = {{"Authorization", "Bearer cst_ci"}};
  // TCP: no token, a wrong one, the right one.
  auto none = tcp_request(port, "GET", "/v1/health");
  BOOST_TEST(none.status == 401u);
  BOOST_TEST(none.error_code() == "unauthorized");
  BOOST_TEST(none.www_authenticate == R"(Bearer realm="castellan")");
  auto wrong = tcp_request(port, "GET", "/v1/pools", {}, {{"Authorization", "Bearer cst_cj"}});
  BOOST_TEST(wrong.status == 401u);
  BOOST_TEST(wrong.www_authenticate == R"(Bearer realm="castellan", error="invalid_token")");
  BOOST_TEST(wrong.body.find("cst_cj") == std::string::npos, "the token is never echoed");
  BOOST_TEST(tcp_request(port, "GET", "/v1/pools", {}, ci).status == 200u);
  // Two Authorization headers are refused, whichever is valid.
  {
    namespace net = boost::asio;
    net::io_context io;
    net::ip::tcp::socket sock(io);
    sock.connect({net::ip::make_address("127.0.0.1"), port});
    const std::string twice = "GET /v1/pools HTTP/1.1\r\nHost: localhost\r\n"
                              "Authorization: Bearer cst_ci\r\nAuthorization: Bearer cst_x\r\n\r\n";
    net::write(sock, net::buffer(twice));
    boost::beast::flat_buffer buf;
    boost::beast::http::response<boost::beast::http::string_body> res;
    boost::beast::http::read(sock, buf, res);
    BOOST_TEST(res.result_int() == 401u);
  }
  // Every route needs it on TCP, exec included, before anything else.
  auto anon_exec = tcp_request(port, "POST", "/v1/exec", R"j({"code":"print(1)"})j");
  BOOST_TEST(anon_exec.status == 401u);
  auto ok = tcp_request(port, "POST", "/v1/exec", R"j({"code":"print(6*7)"})j", ci);
  BOOST_TEST_REQUIRE(ok.status == 200u, ok.body);
  BOOST_TEST(ok.json()["stdout"] == "42\n");
  // The allowlist: the default pool when the request names none.
  auto other = tcp_request(port, "POST", "/v1/exec", R"j({"code":"print(1)"})j",
                           {{"Authorization", "Bearer cst_other"}});
  BOOST_TEST(other.status == 403u);
  BOOST_TEST(other.error_code() == "pool_not_allowed");
  BOOST_TEST(other.error_message() == "token 'other' may not use pool 'default'");
  // With a policy of its own, too.
  auto with_policy = tcp_request(port, "POST", "/v1/exec",
                                 R"j({"code":"print(1)","policy":{"extends":"default"}})j",
                                 {{"Authorization", "Bearer cst_other"}});
  BOOST_TEST(with_policy.status == 403u);
  // Unix socket: no token is the socket's owner, with no limits.
  http_client c(socket_path);
  BOOST_TEST(c.get("/v1/pools").status == 200u);
  // A token sent there must be valid, and then its allowlist applies.
  c.send("GET", "/v1/pools");
  {
    http_client raw(socket_path);
    raw.send_raw("GET /v1/pools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer cst_nope\r\n\r\n");
    BOOST_TEST(raw.read().status == 401u);
    raw.send_raw("POST /v1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer cst_other\r\n"
                 "Content-Type: application/json\r\nContent-Length: 19\r\n\r\n"
                 "{\"code\":\"print(1)\"}");
    auto r = raw.read();
    BOOST_TEST(r.status == 403u);
    BOOST_TEST(r.error_code() == "pool_not_allowed");
  }
  BOOST_TEST(c.read().status == 200u);
}

BOOST_AUTO_TEST_CASE(a_tokens_max_concurrent_is_a_429_beyond_it) {
  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  start({}, {lo}, [&](api_options& o) {
    token_entry e;
    e.name = "ci";
    e.sha256 = digest_of("cst_ci");
    e.max_concurrent = 1;
    o.tokens = std::vector<token_entry>{e};
  });
  const uint16_t port = api->bound()[1].port;
  const test::header_list ci = {{"Authorization", "Bearer cst_ci"}};
  auto held = std::async(std::launch::async, [&] {
    return test::tcp_request(port, "POST", "/v1/exec",
                             R"j({"code":"import time; time.sleep(120)"})j", ci);
  });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  auto beyond = test::tcp_request(port, "POST", "/v1/exec", R"j({"code":"print(1)"})j", ci);
  BOOST_TEST(beyond.status == 429u);
  BOOST_TEST(beyond.error_code() == "too_many_execs");
  // The unix socket's owner is not counted against the token.
  auto owner = exec({{"code", "print('owner')"}});
  BOOST_TEST(owner.status == 200u, owner.body);
  // Once the held exec is answered, the token may run again.
  BOOST_TEST(api->cancel_in_flight() == 1u);
  BOOST_TEST(held.get().json()["error_class"] == "cancelled");
  auto again = test::tcp_request(port, "POST", "/v1/exec", R"j({"code":"print(2)"})j", ci);
  BOOST_TEST(again.status == 200u, again.body);
}

BOOST_AUTO_TEST_CASE(a_token_cancels_only_its_own_execs_and_its_ids_are_its_own) {
  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  start({}, {lo}, [&](api_options& o) {
    token_entry a;
    a.name = "a";
    a.sha256 = digest_of("cst_a");
    token_entry b = a;
    b.name = "b";
    b.sha256 = digest_of("cst_b");
    o.tokens = std::vector<token_entry>{a, b};
  });
  const uint16_t port = api->bound()[1].port;
  const test::header_list ta = {{"Authorization", "Bearer cst_a"}};
  const test::header_list tb = {{"Authorization", "Bearer cst_b"}};
  const std::string sleeper = R"j({"code":"import time; time.sleep(120)","id":"job"})j";
  auto held_a = std::async(
      std::launch::async, [&] { return test::tcp_request(port, "POST", "/v1/exec", sleeper, ta); });
  wait_for_pool([](const json& p) { return p["busy"] == 1; });
  // b neither sees nor cancels a's exec, by its id or by its number; the
  // id is free for b's own.
  auto by_id = test::tcp_request(port, "DELETE", "/v1/execs/job", {}, tb);
  BOOST_TEST(by_id.status == 404u);
  BOOST_TEST(by_id.error_code() == "no_such_exec");
  BOOST_TEST(test::tcp_request(port, "DELETE", "/v1/execs/1", {}, tb).status == 404u);
  auto held_b = std::async(
      std::launch::async, [&] { return test::tcp_request(port, "POST", "/v1/exec", sleeper, tb); });
  wait_for_pool([](const json& p) { return p["busy"] == 2; });
  auto mine = test::tcp_request(port, "DELETE", "/v1/execs/job", {}, tb);
  BOOST_TEST_REQUIRE(mine.status == 202u, mine.body);
  BOOST_TEST(mine.json()["exec_id"] == 2);
  BOOST_TEST(held_b.get().json()["error_class"] == "cancelled");
  // The unix socket's users (no token) may cancel any exec, by number.
  http_client c(socket_path);
  auto owner = c.request("DELETE", "/v1/execs/1");
  BOOST_TEST(owner.status == 202u, owner.body);
  auto r = held_a.get();
  BOOST_TEST(r.json()["error_class"] == "cancelled");
  BOOST_TEST(r.json()["id"] == "job");
}

namespace {

/// Reads from `c`'s socket until `text` has arrived or the server closes
/// (30 s safety net, the client's SO_RCVTIMEO); everything read so far.
std::string read_until(http_client& c, std::string& seen, const std::string& text) {
  char buf[4096];
  while (seen.find(text) == std::string::npos) {
    boost::system::error_code ec;
    const std::size_t n = c.socket().read_some(boost::asio::buffer(buf), ec);
    if (ec || n == 0)
      break;
    seen.append(buf, n);
  }
  return seen;
}

/// The `data:` JSON of every event named `name` in a text/event-stream body.
std::vector<json> events_named(const std::string& body, const std::string& name) {
  std::vector<json> out;
  const std::string tag = "event: " + name + "\ndata: ";
  for (auto pos = body.find(tag); pos != std::string::npos; pos = body.find(tag, pos + 1)) {
    const auto start = pos + tag.size();
    out.push_back(json::parse(body.substr(start, body.find('\n', start) - start)));
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_streamed_exec_sends_its_output_as_it_is_written) {
  start();
  // The code prints, then waits for SIGUSR1, which the test sends only once
  // the first event has arrived: that event cannot have come with the
  // result.
  const std::string tag = test::unique_task_name("ckstream");
  http_client c(socket_path);
  namespace http = boost::beast::http;
  http::request<http::string_body> req{http::verb::post, "/v1/exec", 11};
  req.set(http::field::host, "localhost");
  req.set(http::field::content_type, "application/json");
  req.set(http::field::accept, "application/json, text/event-stream;q=0.9");
  req.body() = json{{"code", test::python_set_task_name(tag) +
                                 "import signal, sys\n"
                                 "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                                 "print('first line')\n"
                                 "sys.stderr.write('caf\\u00e9\\n')\n"
                                 "signal.sigwait({signal.SIGUSR1})\n"
                                 "sys.stdout.buffer.write(b'\\xff raw\\n')\n"},
                    {"id", "streamed-1"}}
                     .dump();
  req.prepare_payload();
  http::write(c.socket(), req);
  std::string seen;
  read_until(c, seen, "first line");
  BOOST_TEST(seen.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, seen);
  BOOST_TEST(seen.find("Content-Type: text/event-stream") != std::string::npos, seen);
  BOOST_TEST(seen.find("event: result") == std::string::npos, "the result came first: " << seen);
  BOOST_REQUIRE(test::wait_until_task_in_syscall(tag, 128 /* rt_sigtimedwait */));
  for (pid_t pid : test::tasks_named(tag))
    ::kill(pid, SIGUSR1);
  // To the end: the stream ends when the server closes the connection
  // (read_until stops at EOF, which "\x01" never precedes).
  read_until(c, seen, "\x01");
  BOOST_TEST(seen.find("event: result") != std::string::npos, seen);
  auto out = events_named(seen, "stdout");
  auto err = events_named(seen, "stderr");
  auto result = events_named(seen, "result");
  BOOST_REQUIRE(result.size() == 1u);
  BOOST_REQUIRE(out.size() == 2u);
  BOOST_TEST(out[0]["data"] == "first line\n");
  BOOST_TEST(out[0]["base64"] == false);
  BOOST_TEST(out[1]["base64"] == true);
  BOOST_TEST(out[1]["data"] == "/yByYXcK"); // "\xff raw\n"
  BOOST_REQUIRE(err.size() == 1u);
  BOOST_TEST(err[0]["data"] == "caf\u00e9\n");
  BOOST_TEST(result[0]["id"] == "streamed-1");
  BOOST_TEST(result[0]["error_class"] == "ok");
  BOOST_TEST(result[0]["stdout_base64"] == true); // the whole output, once more
  BOOST_TEST(api->in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(a_streamed_request_refused_before_it_runs_gets_a_plain_error) {
  start();
  http_client c(socket_path);
  auto r = c.request("POST", "/v1/exec", json{{"code", "1"}, {"pool", "nope"}}.dump(),
                     "application/json", {{"Accept", "text/event-stream"}});
  BOOST_TEST(r.status == 404u);
  BOOST_TEST(r.error_code() == "unknown_pool");
}

BOOST_AUTO_TEST_CASE(a_streaming_client_that_leaves_has_its_exec_cancelled) {
  start();
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  {
    http_client c(socket_path);
    c.send("POST", "/v1/exec",
           json{{"code", "import time\nprint('started')\ntime.sleep(120)"}}.dump(),
           "application/json", {{"Accept", "text/event-stream"}});
    std::string seen;
    read_until(c, seen, "started");
    BOOST_TEST(seen.find("event: stdout") != std::string::npos, seen);
  }
  const std::string series = R"(castellan_execs_total{error_class="cancelled",pool="default"})";
  wait_until("/metrics", [&](const http_reply& r) { return metric(r.body, series) == 1; });
  wait_for_pool([](const json& p) { return p["idle"] == 2 && p["busy"] == 0; });
  BOOST_TEST(api->in_flight() == 0u);
}


// -- GET /v1/audit -------------------------------------------------------------

namespace {

/// An audit that records everything, to `dir`/audit.jsonl.
audit_config full_audit(const std::string& dir) {
  audit_config a;
  a.enabled = true;
  a.events = {"all"};
  a.file.path = dir + "/audit.jsonl";
  a.file.fsync = fsync_policy::never;
  a.report_interval_ms = 50;
  return a;
}

/// Opens `GET target` on `c` and reads until the stream says it is live.
std::string open_audit(http_client& c, const std::string& target) {
  c.send("GET", target, {}, "", {{"Accept", "text/event-stream"}});
  std::string seen;
  read_until(c, seen, "event: live\n");
  BOOST_TEST_REQUIRE(seen.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, seen);
  BOOST_TEST_REQUIRE(seen.find("Content-Type: text/event-stream") != std::string::npos, seen);
  return seen;
}

/// The `data:` line of every `event: audit`, unparsed.
std::vector<std::string> audit_lines(const std::string& body) {
  std::vector<std::string> out;
  const std::string tag = "event: audit\ndata: ";
  for (auto pos = body.find(tag); pos != std::string::npos; pos = body.find(tag, pos + 1)) {
    const auto start = pos + tag.size();
    out.push_back(body.substr(start, body.find('\n', start) - start));
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

BOOST_AUTO_TEST_CASE(audit_records_arrive_live_as_the_file_writes_them) {
  audit = full_audit(dir);
  start();
  http_client c(socket_path);
  std::string seen = open_audit(c, "/v1/audit?kind=exec_end");
  BOOST_TEST(events_named(seen, "live")[0]["history"] == 0);
  auto r = exec(json{{"code", "print(1)"}});
  BOOST_TEST_REQUIRE(r.status == 200u, r.body);
  const uint64_t exec_id = r.json()["exec_id"];
  read_until(c, seen, "\"exec_id\":" + std::to_string(exec_id));
  read_until(c, seen, "\n\n");
  auto lines = audit_lines(seen);
  BOOST_TEST_REQUIRE(lines.size() == 1u, seen);
  auto rec = json::parse(lines[0]);
  BOOST_TEST(rec["kind"] == "exec_end"); // the kind filter left exec_start out
  BOOST_TEST(rec["exec_id"] == exec_id);
  // Byte for byte the line of the file.
  caf::scoped_actor s(sys);
  s->request(sup, std::chrono::seconds(10), audit_flush_atom::value)
      .receive([](audit_stats&) {}, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  BOOST_TEST(read_file(dir + "/audit.jsonl").find(lines[0] + "\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_audit_filters_are_a_400_naming_the_field) {
  audit = full_audit(dir);
  start();
  http_client c(socket_path);
  auto expect_400 = [&](const std::string& target, const std::string& field,
                        const std::string& named) {
    auto r = c.get(target);
    BOOST_TEST(r.status == 400u, target << ": " << r.body);
    BOOST_TEST(r.json()["error"]["field"] == field, target << ": " << r.body);
    BOOST_TEST(r.body.find(named) != std::string::npos, target << ": " << r.body);
  };
  expect_400("/v1/audit?kind=exec_end,exec_stop", "kind", "exec_stop");
  expect_400("/v1/audit?kind=exec_start&kind=nope", "kind", "nope");
  expect_400("/v1/audit?exec=12x", "exec", "12x");
  expect_400("/v1/audit?exec=0", "exec", "positive");
  expect_400("/v1/audit?since=yesterday", "since", "yesterday");
  expect_400("/v1/audit?since=2026-13-01T00:00:00Z", "since", "2026-13-01");
  expect_400("/v1/audit?kinds=exec_end", "kinds", "unknown query parameter");
  expect_400("/v1/audit?kind=%zz", "kind", "percent");
  auto post = c.request("POST", "/v1/audit", "{}", "application/json");
  BOOST_TEST(post.status == 405u);
  // A percent-encoded offset is a time zone, not a space.
  http_client c2(socket_path);
  std::string seen = open_audit(c2, "/v1/audit?since=2020-01-01T00:00:00%2B01:00&kind=exec_end");
  BOOST_TEST(events_named(seen, "live").size() == 1u);
}

BOOST_AUTO_TEST_CASE(without_an_audit_the_route_says_so) {
  start(); // no audit at all
  http_client c(socket_path);
  auto r = c.get("/v1/audit");
  BOOST_TEST(r.status == 404u, r.body);
  BOOST_TEST(r.error_code() == "audit_disabled");
  auto h = c.get("/v1/audit?since=1h");
  BOOST_TEST(h.status == 400u, h.body);
  BOOST_TEST(h.error_code() == "no_audit_file");
  BOOST_TEST(h.json()["error"]["field"] == "since");
}

BOOST_AUTO_TEST_CASE(since_serves_the_file_then_live_without_gaps_or_duplicates) {
  audit = full_audit(dir);
  start();
  for (int i = 0; i < 3; ++i)
    BOOST_TEST_REQUIRE(exec(json{{"code", "print(1)"}}).status == 200u);
  // Execs run all along, so that records come while the history is read:
  // those are held and sent live, once.
  std::atomic<bool> busy{true};
  std::thread load([&] {
    while (busy)
      exec(json{{"code", "print(2)"}});
  });
  std::vector<std::string> seen_bodies;
  for (int round = 0; round < 3; ++round) {
    http_client c(socket_path);
    std::string seen = open_audit(c, "/v1/audit?since=1h");
    seen_bodies.push_back(seen);
    BOOST_TEST(events_named(seen, "live")[0]["history"] >= 6);
  }
  busy = false;
  load.join();
  http_client c(socket_path);
  std::string seen = open_audit(c, "/v1/audit?since=1h");
  const uint64_t history = events_named(seen, "live")[0]["history"];
  auto last = exec(json{{"code", "print(3)"}});
  BOOST_TEST_REQUIRE(last.status == 200u);
  const uint64_t exec_id = last.json()["exec_id"];
  read_until(c, seen, "\"kind\":\"exec_end\",\"seq\"");
  for (;;) {
    // Until the last exec's exec_end.
    bool found = false;
    for (const auto& l : audit_lines(seen)) {
      auto j = json::parse(l);
      if (j["kind"] == "exec_end" && j["exec_id"] == exec_id)
        found = true;
    }
    if (found)
      break;
    std::string more;
    char buf[4096];
    boost::system::error_code ec;
    const std::size_t n = c.socket().read_some(boost::asio::buffer(buf), ec);
    BOOST_TEST_REQUIRE(!ec, ec.message());
    seen.append(buf, n);
  }
  read_until(c, seen, "\n\n");
  auto lines = audit_lines(seen);
  BOOST_TEST(lines.size() > history);
  BOOST_TEST(events_named(seen, "dropped").empty(), seen);
  // Every record of this daemon, once each, in order: seq 1, 2, 3, …
  uint64_t want = 1;
  for (const auto& l : lines) {
    auto j = json::parse(l);
    BOOST_TEST_REQUIRE(j["seq"] == want, "record " << want << " is " << l);
    ++want;
  }
  // The earlier streams, opened while execs ran, hold no gap or repeat either.
  for (const auto& body : seen_bodies) {
    uint64_t w = 1;
    for (const auto& l : audit_lines(body)) {
      BOOST_TEST_REQUIRE(json::parse(l)["seq"] == w, "record " << w << " is " << l);
      ++w;
    }
  }
}

BOOST_AUTO_TEST_CASE(a_client_that_falls_behind_is_told_what_it_lost_and_execs_go_on) {
  audit = full_audit(dir);
  audit->subscriber_window = 4;
  audit->subscriber_timeout_ms = 120000; // the window, not the timeout, decides
  start();
  caf::scoped_actor s(sys);
  audit_actor a;
  s->request(sup, std::chrono::seconds(10), get_audit_atom::value)
      .receive([&](audit_actor& x) { a = x; }, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  BOOST_TEST_REQUIRE(static_cast<bool>(a));
  http_client c(socket_path);
  std::string seen = open_audit(c, "/v1/audit?kind=policy_rejected");
  // 40 records of 256 KiB each while the client reads nothing: the socket
  // fills, then the window, then the audit actor drops.
  auto big = [](int i) {
    policy_rejection r;
    r.policy_name = "big-" + std::to_string(i);
    r.path = "/nowhere";
    r.errors.assign(64, std::string(4000, 'x'));
    return r;
  };
  constexpr int n = 40;
  for (int i = 0; i < n; ++i)
    s->send(a, big(i));
  // An exec meanwhile is answered: the stalled client holds nobody up.
  auto r = exec(json{{"code", "print('unstalled')"}});
  BOOST_TEST(r.status == 200u, r.body);
  BOOST_TEST(r.json()["stdout"] == "unstalled\n");
  s->request(a, std::chrono::seconds(10), status_atom::value)
      .receive([](audit_stats& st) { BOOST_TEST(st.subscriber_dropped > 0u); },
               [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  // The client reads again. Markers go out until one arrives (those sent
  // while the window is still full are dropped too), then a last record:
  // the records that reached the client and the drops it was told of add
  // up to all that was sent.
  std::mutex mx;
  std::atomic<bool> reading{true};
  std::thread reader([&] {
    char buf[65536];
    while (reading) {
      boost::system::error_code ec;
      const std::size_t got = c.socket().read_some(boost::asio::buffer(buf), ec);
      if (ec || got == 0)
        break;
      std::lock_guard<std::mutex> guard(mx);
      seen.append(buf, got);
      const auto last = seen.find("the-last-one");
      if (last != std::string::npos && seen.find("\n\n", last) != std::string::npos)
        break;
    }
  });
  auto arrived = [&](const std::string& text) {
    std::lock_guard<std::mutex> guard(mx);
    return seen.find(text) != std::string::npos;
  };
  int markers = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (bool found = false; !found && std::chrono::steady_clock::now() < deadline;) {
    policy_rejection marker;
    marker.policy_name = "marker-" + std::to_string(markers++);
    s->send(a, marker);
    for (int i = 0; i < 20 && !found; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      for (int k = 0; k < markers && !found; ++k)
        found = arrived("\"marker-" + std::to_string(k) + "\"");
    }
  }
  policy_rejection last;
  last.policy_name = "the-last-one";
  s->send(a, last);
  reader.join();
  reading = false;
  uint64_t dropped = 0;
  for (auto& d : events_named(seen, "dropped"))
    dropped += d["dropped"].get<uint64_t>();
  const auto delivered = audit_lines(seen).size();
  BOOST_TEST(dropped > 0u, seen.size());
  BOOST_TEST(delivered + dropped == static_cast<std::size_t>(n + markers + 1),
             delivered << " delivered, " << dropped << " dropped");
  // The `dropped` event comes right before the record that carries it.
  const auto dpos = seen.find("event: dropped");
  BOOST_TEST((dpos != std::string::npos && seen.find("event: audit", dpos) != std::string::npos));
}

BOOST_AUTO_TEST_CASE(a_client_that_leaves_is_unsubscribed) {
  audit = full_audit(dir);
  start();
  caf::scoped_actor s(sys);
  audit_actor a;
  s->request(sup, std::chrono::seconds(10), get_audit_atom::value)
      .receive([&](audit_actor& x) { a = x; }, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  auto subscribers = [&] {
    uint64_t n = 99;
    s->request(a, std::chrono::seconds(10), status_atom::value)
        .receive([&](audit_stats& st) { n = st.subscribers; },
                 [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
    return n;
  };
  {
    http_client c(socket_path);
    open_audit(c, "/v1/audit");
    http_client c2(socket_path);
    open_audit(c2, "/v1/audit?since=1h");
    BOOST_TEST(subscribers() == 2u);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (subscribers() != 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  BOOST_TEST(subscribers() == 0u);
  // And the server goes on.
  BOOST_TEST(exec(json{{"code", "print(1)"}}).status == 200u);
}

BOOST_AUTO_TEST_CASE(a_token_limited_to_some_pools_sees_only_their_records) {
  audit = full_audit(dir);
  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  start({}, {lo}, [&](api_options& o) {
    token_entry e;
    e.name = "ci";
    e.sha256 = digest_of("cst_ci");
    e.pools = std::vector<std::string>{"default", "batch"};
    o.tokens = std::vector<token_entry>{e};
  });
  const uint16_t port = api->bound()[1].port;
  caf::scoped_actor s(sys);
  audit_actor a;
  s->request(sup, std::chrono::seconds(10), get_audit_atom::value)
      .receive([&](audit_actor& x) { a = x; }, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  test::detail::safety_net(sock.native_handle());
  const std::string get = "GET /v1/audit?kind=exec_start,policy_rejected HTTP/1.1\r\n"
                          "Host: localhost\r\nAuthorization: Bearer cst_ci\r\n\r\n";
  net::write(sock, net::buffer(get));
  std::string seen;
  auto read_to = [&](const std::string& text) {
    char buf[4096];
    while (seen.find(text) == std::string::npos) {
      boost::system::error_code ec;
      const std::size_t got = sock.read_some(net::buffer(buf), ec);
      if (ec || got == 0)
        break;
      seen.append(buf, got);
    }
  };
  read_to("event: live\n");
  BOOST_TEST_REQUIRE(seen.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, seen);
  // ci's own execs (a token limited to some pools sees no other's).
  auto started = [](uint64_t id, const std::string& pool) {
    exec_started e;
    e.exec_id = id;
    e.pool = pool;
    e.origin.peer = "tcp 127.0.0.1:40000";
    e.origin.token = "ci";
    return e;
  };
  s->send(a, started(901, "elsewhere"));
  policy_rejection rej;
  rej.policy_name = "secret-policy";
  s->send(a, rej);
  s->send(a, started(902, "batch"));
  s->send(a, started(903, "default"));
  read_to("\"exec_id\":903");
  read_to("\n\n");
  BOOST_TEST(seen.find("\"exec_id\":902") != std::string::npos, seen);
  BOOST_TEST(seen.find("\"exec_id\":901") == std::string::npos, seen);
  BOOST_TEST(seen.find("secret-policy") == std::string::npos, seen);
  // History is filtered the same way.
  s->request(a, std::chrono::seconds(10), audit_flush_atom::value)
      .receive([](audit_stats&) {}, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  net::ip::tcp::socket sock2(io);
  sock2.connect({net::ip::make_address("127.0.0.1"), port});
  test::detail::safety_net(sock2.native_handle());
  const std::string get2 = "GET /v1/audit?since=1h&kind=exec_start,policy_rejected HTTP/1.1\r\n"
                           "Host: localhost\r\nAuthorization: Bearer cst_ci\r\n\r\n";
  net::write(sock2, net::buffer(get2));
  std::string seen2;
  {
    char buf[4096];
    while (seen2.find("event: live\n") == std::string::npos) {
      boost::system::error_code ec;
      const std::size_t got = sock2.read_some(net::buffer(buf), ec);
      if (ec || got == 0)
        break;
      seen2.append(buf, got);
    }
  }
  BOOST_TEST(seen2.find("\"exec_id\":903") != std::string::npos, seen2);
  BOOST_TEST(seen2.find("\"exec_id\":901") == std::string::npos, seen2);
  BOOST_TEST(seen2.find("secret-policy") == std::string::npos, seen2);
}

// -- what a token sees and keeps seeing across reloads --------------------------

namespace {

token_entry token_of(std::string name, const std::string& secret,
                     std::optional<std::vector<std::string>> pools = std::nullopt) {
  token_entry e;
  e.name = std::move(name);
  e.sha256 = digest_of(secret);
  e.pools = std::move(pools);
  return e;
}

/// Opens `GET target` on `c` with `secret` as its bearer token (on the unix
/// socket a token sent must be valid, and then its view applies) and reads
/// until the stream says it is live.
std::string open_audit_as(http_client& c, const std::string& target, const std::string& secret) {
  c.send("GET", target, {}, "",
         {{"Accept", "text/event-stream"}, {"Authorization", "Bearer " + secret}});
  std::string seen;
  read_until(c, seen, "event: live\n");
  BOOST_TEST_REQUIRE(seen.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, seen);
  return seen;
}

/// Reads `c` to its end; true when the server closed it (false: the 30 s
/// safety net ran out first; a stream's keep-alives do not extend it).
bool read_to_close(http_client& c, std::string& seen) {
  char buf[4096];
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    boost::system::error_code ec;
    const std::size_t n = c.socket().read_some(boost::asio::buffer(buf), ec);
    seen.append(buf, n);
    if (ec)
      return ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset;
  }
  return false;
}

audit_actor audit_of(caf::actor_system& sys, const supervisor_actor& sup) {
  caf::scoped_actor s(sys);
  audit_actor a;
  s->request(sup, std::chrono::seconds(10), get_audit_atom::value)
      .receive([&](audit_actor& x) { a = x; }, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  return a;
}

exec_started started_by(uint64_t id, const std::string& token, const std::string& pool = "default") {
  exec_started e;
  e.exec_id = id;
  e.pool = pool;
  e.origin.peer = token.empty() ? "unix uid=0 gid=0 pid=1" : "tcp 127.0.0.1:40000";
  e.origin.token = token;
  return e;
}

exec_finished finished(uint64_t id, const std::string& detail = "done",
                       const std::string& pool = "default") {
  exec_finished e;
  e.exec_id = id;
  e.pool = pool;
  e.detail = detail;
  return e;
}

} // namespace

BOOST_AUTO_TEST_CASE(a_reload_ends_the_audit_streams_of_a_revoked_or_narrowed_token) {
  audit = full_audit(dir);
  start({}, {}, [&](api_options& o) {
    o.tokens = std::vector<token_entry>{
        token_of("gone", "cst_gone", std::vector<std::string>{"default"}),
        token_of("narrowed", "cst_narrowed", std::vector<std::string>{"default", "batch"}),
        token_of("kept", "cst_kept", std::vector<std::string>{"default"}),
        token_of("wide", "cst_wide"),
        token_of("renamed", "cst_renamed")};
  });
  http_client gone(socket_path), narrowed(socket_path), kept(socket_path), wide(socket_path),
      renamed(socket_path), owner(socket_path);
  std::string s_gone = open_audit_as(gone, "/v1/audit", "cst_gone");
  std::string s_narrowed = open_audit_as(narrowed, "/v1/audit", "cst_narrowed");
  std::string s_kept = open_audit_as(kept, "/v1/audit?kind=exec_start", "cst_kept");
  std::string s_wide = open_audit_as(wide, "/v1/audit?kind=exec_start", "cst_wide");
  std::string s_renamed = open_audit_as(renamed, "/v1/audit", "cst_renamed");
  std::string s_owner = open_audit(owner, "/v1/audit?kind=exec_start");

  api->replace_tokens({token_of("narrowed", "cst_narrowed", std::vector<std::string>{"default"}),
                       token_of("kept", "cst_kept", std::vector<std::string>{"default"}),
                       token_of("wide", "cst_wide"), token_of("new-name", "cst_renamed")});
  // The revoked token's stream, the narrowed one's and the renamed one's
  // end, each saying why, and close.
  BOOST_TEST_REQUIRE(read_to_close(gone, s_gone), s_gone);
  auto end_gone = events_named(s_gone, "end");
  BOOST_TEST_REQUIRE(end_gone.size() == 1u, s_gone);
  BOOST_TEST(end_gone[0]["reason"] == "token 'gone' was revoked");
  BOOST_TEST(read_to_close(narrowed, s_narrowed), s_narrowed);
  auto end_narrowed = events_named(s_narrowed, "end");
  BOOST_TEST_REQUIRE(end_narrowed.size() == 1u, s_narrowed);
  BOOST_TEST(end_narrowed[0]["reason"] ==
             "the pools of token 'narrowed' changed: reconnect to see what they are now");
  BOOST_TEST(read_to_close(renamed, s_renamed), s_renamed);
  BOOST_TEST(s_renamed.find("token 'renamed' was renamed 'new-name'") != std::string::npos,
             s_renamed);

  // The others go on: a record arrives on each.
  caf::scoped_actor s(sys);
  auto a = audit_of(sys, sup);
  s->send(a, started_by(7, "kept"));
  for (auto& [c, seen] : std::vector<std::pair<http_client*, std::string*>>{
           {&kept, &s_kept}, {&wide, &s_wide}, {&owner, &s_owner}}) {
    read_until(*c, *seen, "\"exec_id\":7");
    BOOST_TEST(seen->find("\"exec_id\":7") != std::string::npos, *seen);
    BOOST_TEST(seen->find("event: end") == std::string::npos, *seen);
  }
  // The revoked token cannot open another; the narrowed one's new stream
  // has its new view.
  http_client again(socket_path);
  again.send("GET", "/v1/audit", {}, "", {{"Authorization", "Bearer cst_gone"}});
  BOOST_TEST(again.read().status == 401u);
  http_client narrowed2(socket_path);
  std::string s_narrowed2 = open_audit_as(narrowed2, "/v1/audit", "cst_narrowed");
  s->send(a, started_by(8, "narrowed", "batch"));
  s->send(a, started_by(9, "narrowed"));
  read_until(narrowed2, s_narrowed2, "\"exec_id\":9");
  BOOST_TEST(s_narrowed2.find("\"exec_id\":9") != std::string::npos, s_narrowed2);
  BOOST_TEST(s_narrowed2.find("\"exec_id\":8") == std::string::npos, s_narrowed2);
}

BOOST_AUTO_TEST_CASE(a_token_limited_to_some_pools_sees_its_own_execs_only) {
  audit = full_audit(dir);
  start({}, {}, [&](api_options& o) {
    o.tokens = std::vector<token_entry>{
        token_of("ci", "cst_ci", std::vector<std::string>{"default"}),
        token_of("other", "cst_other", std::vector<std::string>{"default"}),
        token_of("wide", "cst_wide")};
  });
  http_client ci(socket_path), ci_all(socket_path), wide(socket_path);
  // A kind filter that leaves out exec_start: what the stream learns from
  // them still decides.
  std::string s_ci = open_audit_as(ci, "/v1/audit?kind=exec_end,worker_lost", "cst_ci");
  std::string s_all = open_audit_as(ci_all, "/v1/audit", "cst_ci");
  std::string s_wide = open_audit_as(wide, "/v1/audit", "cst_wide");
  caf::scoped_actor s(sys);
  auto a = audit_of(sys, sup);
  s->send(a, started_by(11, "ci"));
  s->send(a, started_by(12, "other"));
  s->send(a, started_by(13, ""));
  s->send(a, finished(11, "ci-done"));
  s->send(a, finished(12, "other-done"));
  s->send(a, finished(13, "owner-done"));
  s->send(a, finished(14, "never-started"));
  worker_lost_event during;
  during.pool = "default";
  during.exec_id = 12;
  during.reason = "lost-during-other";
  s->send(a, during);
  // An exec id that comes back (another run of the daemon, in the file) is
  // decided by its new exec_start.
  s->send(a, started_by(11, "other"));
  s->send(a, finished(11, "reused-by-other"));
  worker_lost_event idle;
  idle.pool = "default";
  idle.reason = "idle-marker";
  s->send(a, idle);
  read_until(ci, s_ci, "idle-marker");
  read_until(ci_all, s_all, "idle-marker");
  read_until(wide, s_wide, "idle-marker");
  auto check_ci = [](const std::string& seen, bool starts) {
    BOOST_TEST(seen.find("ci-done") != std::string::npos, seen);
    BOOST_TEST(seen.find("idle-marker") != std::string::npos, seen);
    for (const char* hidden : {"other-done", "owner-done", "never-started", "lost-during-other",
                               "reused-by-other", "\"exec_id\":12", "\"exec_id\":13",
                               "\"token\":\"other\"", "unix uid=0"})
      BOOST_TEST(seen.find(hidden) == std::string::npos, hidden << " in " << seen);
    BOOST_TEST((seen.find("\"kind\":\"exec_start\"") != std::string::npos) == starts, seen);
  };
  check_ci(s_ci, false);
  check_ci(s_all, true);
  // A token without an allowlist sees every exec.
  for (const char* shown : {"ci-done", "other-done", "owner-done", "reused-by-other"})
    BOOST_TEST(s_wide.find(shown) != std::string::npos, shown);

  // From the file, the same.
  s->request(a, std::chrono::seconds(10), audit_flush_atom::value)
      .receive([](audit_stats&) {}, [](caf::error& e) { BOOST_FAIL(caf::to_string(e)); });
  http_client h(socket_path), h_all(socket_path);
  check_ci(open_audit_as(h, "/v1/audit?since=1h&kind=exec_end,worker_lost", "cst_ci"), false);
  check_ci(open_audit_as(h_all, "/v1/audit?since=1h", "cst_ci"), true);
}

BOOST_AUTO_TEST_CASE(a_reload_cancels_execs_on_pools_a_token_lost_and_ends_their_streams) {
  start({}, {}, [&](api_options& o) {
    o.tokens = std::vector<token_entry>{
        token_of("narrowed", "cst_narrowed", std::vector<std::string>{"default", "batch"}),
        token_of("streamer", "cst_streamer"), token_of("kept", "cst_kept")};
  });
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  // narrowed: a plain exec; streamer: a streamed one, revoked.
  auto held = std::async(std::launch::async, [&] {
    http_client c(socket_path);
    return c.request("POST", "/v1/exec", json{{"code", "import time; time.sleep(120)"}}.dump(),
                     "application/json", {{"Authorization", "Bearer cst_narrowed"}});
  });
  http_client streamed(socket_path);
  streamed.send("POST", "/v1/exec",
                json{{"code", "import time\nprint('started', flush=True)\ntime.sleep(120)"}}.dump(),
                "application/json",
                {{"Accept", "text/event-stream"}, {"Authorization", "Bearer cst_streamer"}});
  std::string seen;
  read_until(streamed, seen, "started");
  BOOST_TEST_REQUIRE(seen.find("event: stdout") != std::string::npos, seen);
  wait_for_pool([](const json& p) { return p["busy"] == 2; });
  api->replace_tokens({token_of("narrowed", "cst_narrowed", std::vector<std::string>{"batch"}),
                       token_of("kept", "cst_kept")});
  auto r = held.get();
  BOOST_TEST_REQUIRE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "cancelled", r.body);
  BOOST_TEST(read_to_close(streamed, seen), seen);
  auto result = events_named(seen, "result");
  BOOST_TEST_REQUIRE(result.size() == 1u, seen);
  BOOST_TEST(result[0]["error_class"] == "cancelled");
  BOOST_TEST(result[0]["exit_code"] == 125);
  BOOST_TEST(api->in_flight() == 0u);
}

BOOST_AUTO_TEST_CASE(a_reload_cancels_a_request_policys_exec_whose_token_lost_the_default_pool) {
  // The API's default pool (which a request policy's own pool is made
  // from) is "template" here, the pool the exec runs on "default": the
  // token needs both, and a reload that takes "template" from it cancels
  // the exec.
  start({}, {}, [&](api_options& o) {
    o.default_pool = "template";
    o.tokens = std::vector<token_entry>{
        token_of("ci", "cst_ci", std::vector<std::string>{"default", "template"})};
    // The policy the request extends is its pool's, which it may name.
    o.pool_policies = {{"default", "default"}};
  });
  wait_for_pool([](const json& p) { return p["idle"] == 2; });
  auto held = std::async(std::launch::async, [&] {
    http_client c(socket_path);
    return c.request("POST", "/v1/exec",
                     json{{"code", "import time; time.sleep(120)"},
                          {"pool", "default"},
                          {"policy",
                           {{"version", 1},
                            {"extends", {"default"}},
                            {"limits", {{"pids", 32}, {"code_bytes", 524288}}}}}}
                         .dump(),
                     "application/json", {{"Authorization", "Bearer cst_ci"}});
  });
  wait_until("/v1/pools", [&](const http_reply& x) {
    int busy = 0; // on a pool of the policy's own
    const json body = x.json();
    for (const auto& p : body["pools"])
      busy += p["busy"].get<int>();
    return busy == 1 ||
           held.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
  });
  if (held.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
    auto early = held.get();
    BOOST_FAIL("answered before the reload: " << early.body);
  }
  api->replace_tokens({token_of("ci", "cst_ci", std::vector<std::string>{"default"})});
  auto r = held.get();
  BOOST_TEST_REQUIRE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "cancelled", r.body);
}

BOOST_AUTO_TEST_CASE(a_restricted_token_names_only_the_policies_of_its_pools) {
  start({}, {}, [&](api_options& o) {
    o.tokens = std::vector<token_entry>{
        token_of("ci", "cst_ci", std::vector<std::string>{"default"}),
        token_of("wide", "cst_wide")};
    o.pool_policies = {{"default", "default"}, {"other", "strict"}};
  });
  http_client c(socket_path);
  auto as = [&](const std::string& secret, const std::string& target, const json& body) {
    http_client::headers h;
    if (!secret.empty())
      h.emplace_back("Authorization", "Bearer " + secret);
    return c.request("POST", target, body.dump(), "application/json", h);
  };
  const json strict_named = {{"name", "strict"}, {"exec", "/usr/bin/id"}};
  auto refused = as("cst_ci", "/v1/policies/explain", strict_named);
  BOOST_TEST(refused.status == 403u, refused.body);
  BOOST_TEST(refused.error_code() == "policy_not_allowed");
  BOOST_TEST(refused.json()["error"]["field"] == "/name");
  BOOST_TEST(refused.error_message().find("'strict'") != std::string::npos, refused.body);
  auto extends = as("cst_ci", "/v1/policies/check",
                    {{"policy", {{"version", 1}, {"extends", {"strict"}}}}});
  BOOST_TEST(extends.status == 403u, extends.body);
  BOOST_TEST(extends.json()["error"]["field"] == "/policy/extends/0");
  BOOST_TEST(as("cst_ci", "/v1/policies/explain",
                {{"name", "default"}, {"exec", "/usr/bin/id"}})
                 .status == 200u);
  BOOST_TEST(as("cst_ci", "/v1/policies/check", {{"policy", {{"version", 1}}}}).status == 200u);
  // An exec's request policy is held to the same, before it is admitted.
  auto exec_refused = as("cst_ci", "/v1/exec",
                         {{"code", "print(1)"},
                          {"policy", {{"version", 1}, {"extends", {"strict"}}}}});
  BOOST_TEST(exec_refused.status == 403u, exec_refused.body);
  BOOST_TEST(exec_refused.error_code() == "policy_not_allowed");
  BOOST_TEST(exec_refused.json()["error"]["field"] == "/policy/extends/0");
  BOOST_TEST(api->in_flight() == 0u);
  // A token without pools, and the socket's owner, name any.
  BOOST_TEST(as("cst_wide", "/v1/policies/explain", strict_named).status == 200u);
  BOOST_TEST(as("", "/v1/policies/explain", strict_named).status == 200u);
}

BOOST_AUTO_TEST_CASE(a_tokens_workspaces_are_its_own) {
  if (auto why = test::workspace_kernel_lacks())
    return test::skip(*why);
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  workspace_config ws;
  ws.store.directory = tmp.file("workspaces");
  workspaces = ws;
  auto entry = [](std::string name, const std::string& secret) {
    token_entry e;
    e.name = std::move(name);
    e.sha256 = digest_of(secret);
    return e;
  };
  start({}, {}, [&](api_options& o) {
    o.tokens = std::vector<token_entry>{entry("ci", "cst_ci"), entry("ops", "cst_ops")};
  });
  // Over the unix socket, a token that is sent applies.
  auto as = [&](const std::string& secret, const std::string& method, const std::string& target,
                const json& body = nullptr) {
    http_client c(socket_path);
    http_client::headers h;
    if (!secret.empty())
      h.emplace_back("Authorization", "Bearer " + secret);
    return c.request(method, target, body.is_null() ? std::string{} : body.dump(),
                     "application/json", h);
  };
  auto names = [](const http_reply& r) {
    std::vector<std::string> out;
    const json body = r.json();
    for (const auto& w : body["workspaces"])
      out.push_back(w["name"].get<std::string>());
    return out;
  };
  const json data = {{"name", "data"}, {"quota_bytes", 8 << 20}};
  auto made = as("cst_ci", "POST", "/v1/workspaces", data);
  BOOST_REQUIRE_MESSAGE(made.status == 201u, made.body);
  BOOST_TEST(made.json()["name"] == "data");
  BOOST_TEST(made.json()["quota_bytes"] == 8 << 20);
  // ops has a `data` of its own, and sees only it.
  BOOST_TEST(as("cst_ops", "GET", "/v1/workspaces").json()["workspaces"].empty());
  BOOST_TEST(as("cst_ops", "POST", "/v1/workspaces", data).status == 201u);
  auto again = as("cst_ci", "POST", "/v1/workspaces", data);
  BOOST_TEST(again.status == 409u, again.body);
  BOOST_TEST(again.error_code() == "workspace_exists");
  BOOST_TEST(names(as("cst_ci", "GET", "/v1/workspaces")) == std::vector<std::string>{"data"});
  // The socket's caller sees the store's names: each token's prefix.
  const auto all = names(as("", "GET", "/v1/workspaces"));
  BOOST_REQUIRE(all.size() == 2u);
  for (const auto& n : all)
    BOOST_TEST((n.size() == 18u && n[0] == 't' && n.substr(13) == ".data"), n);

  // A session of ci binds ci's `data`; its files stay for the next session.
  auto session = as("cst_ci", "POST", "/v1/sessions", {{"workspace", "data"}});
  BOOST_REQUIRE_MESSAGE(session.status == 201u, session.body);
  BOOST_TEST(session.json()["workspace"] == "data", session.body);
  const std::string id = session.json()["id"];
  auto wrote = as("cst_ci", "POST", "/v1/sessions/" + id + "/exec",
                  {{"code", "import os\nopen('note.txt', 'w').write('ci')\nprint(os.getcwd())"}});
  BOOST_TEST(wrote.json()["stdout"] == "/workspace\n", wrote.body);
  // In use: not removed.
  auto busy = as("cst_ci", "DELETE", "/v1/workspaces/data");
  BOOST_TEST(busy.status == 409u, busy.body);
  BOOST_TEST(busy.error_code() == "workspace_in_use");
  // ops names ci's workspace by the store's name: it is not ops's.
  std::string ci_store;
  for (const auto& n : all)
    if (n != "t" + to_hex(digest_of("ops")).substr(0, 12) + ".data")
      ci_store = n;
  BOOST_REQUIRE(!ci_store.empty());
  auto foreign = as("cst_ops", "POST", "/v1/sessions", {{"workspace", ci_store}});
  BOOST_TEST(foreign.status == 404u, foreign.body);
  BOOST_TEST(foreign.error_code() == "unknown_workspace", foreign.body);
  auto foreign_rm = as("cst_ops", "DELETE", "/v1/workspaces/" + ci_store);
  BOOST_TEST(foreign_rm.status == 404u, foreign_rm.body);
  // ops's own `data` is empty.
  auto ops_session = as("cst_ops", "POST", "/v1/sessions", {{"workspace", "data"}});
  BOOST_REQUIRE_MESSAGE(ops_session.status == 201u, ops_session.body);
  const std::string ops_id = ops_session.json()["id"];
  auto looked = as("cst_ops", "POST", "/v1/sessions/" + ops_id + "/exec",
                   {{"code", "import os\nprint(os.path.exists('note.txt'))"}});
  BOOST_TEST(looked.json()["stdout"] == "False\n", looked.body);
  BOOST_TEST(as("cst_ops", "DELETE", "/v1/sessions/" + ops_id).status == 200u);

  BOOST_TEST(as("cst_ci", "DELETE", "/v1/sessions/" + id).status == 200u);
  auto again_session = as("cst_ci", "POST", "/v1/sessions", {{"workspace", "data"}});
  BOOST_REQUIRE_MESSAGE(again_session.status == 201u, again_session.body);
  const std::string id2 = again_session.json()["id"];
  auto read = as("cst_ci", "POST", "/v1/sessions/" + id2 + "/exec",
                 {{"code", "print(open('note.txt').read())"}});
  BOOST_TEST(read.json()["stdout"] == "ci\n", read.body);
  BOOST_TEST(as("cst_ci", "DELETE", "/v1/sessions/" + id2).status == 200u);
  auto removed = as("cst_ci", "DELETE", "/v1/workspaces/data");
  BOOST_TEST(removed.status == 200u, removed.body);
  BOOST_TEST(removed.json()["name"] == "data");
  BOOST_TEST(as("cst_ci", "GET", "/v1/workspaces").json()["workspaces"].empty());
  auto gone = as("cst_ci", "DELETE", "/v1/workspaces/data");
  BOOST_TEST(gone.status == 404u, gone.body);
  BOOST_TEST(gone.error_message() == "no workspace 'data'");
  // Bad bodies name their field.
  auto bad = as("cst_ci", "POST", "/v1/workspaces", {{"name", "Data/x"}});
  BOOST_TEST(bad.status == 400u);
  BOOST_TEST(bad.body.find("\"field\":\"/name\"") != std::string::npos, bad.body);
  auto bad_quota = as("cst_ci", "POST", "/v1/workspaces", {{"name", "x"}, {"quota_bytes", -1}});
  BOOST_TEST(bad_quota.body.find("\"field\":\"/quota_bytes\"") != std::string::npos,
             bad_quota.body);
  auto too_big = as("cst_ci", "POST", "/v1/workspaces",
                    {{"name", "x"}, {"quota_bytes", uint64_t{1} << 50}});
  BOOST_TEST(too_big.status == 400u, too_big.body);
  BOOST_TEST(too_big.body.find("\"field\":\"/quota_bytes\"") != std::string::npos,
             too_big.body);
  auto long_name = as("cst_ci", "POST", "/v1/workspaces", {{"name", std::string(60, 'a')}});
  BOOST_TEST(long_name.status == 400u, long_name.body);
}

BOOST_AUTO_TEST_SUITE_END()
