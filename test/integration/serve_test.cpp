// `castellan serve` as a process: it listens where it says, serves the API
// with its built-in default pool, and on SIGTERM drains — an exec in flight
// finishes and is answered while new ones get 503 — then exits 0 and
// removes its socket.

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/process_scan.hpp"
#include "support/run_process.hpp"
#include "support/serve_process.hpp"

using castellan::test::http_client;
using castellan::test::http_reply;
using castellan::test::serve_process;
using castellan::test::wait_until;
using json = nlohmann::json;

BOOST_AUTO_TEST_SUITE(cli_serve)

BOOST_AUTO_TEST_CASE(serves_then_drains_on_sigterm_and_exits_0) {
  serve_process serve;
  BOOST_TEST(serve.first_line() == "castellan: listening on unix:" + serve.socket_path + "\n");
  struct stat st {};
  BOOST_REQUIRE(::lstat(serve.socket_path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0600u);

  {
    http_client c(serve.socket_path);
    auto r = c.post("/v1/exec", {{"code", "print(6*7)"}});
    BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
    BOOST_TEST(r.json()["stdout"] == "42\n");
    BOOST_TEST(r.json()["v"] == 1);
  }

  // An exec that runs until the test lets it finish (SIGUSR1 from here).
  const std::string tag = castellan::test::unique_task_name("cksrv");
  const std::string code = castellan::test::python_set_task_name(tag) +
                           "import signal\n"
                           "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                           "print('waiting', flush=True)\n"
                           "signal.sigwait({signal.SIGUSR1})\n"
                           "print('finished')\n";
  auto in_flight = std::async(std::launch::async, [&] {
    http_client c(serve.socket_path);
    return c.post("/v1/exec", {{"code", code}});
  });
  std::vector<pid_t> tasks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((tasks = castellan::test::tasks_named(tag)).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  BOOST_REQUIRE(castellan::test::wait_until_task_in_syscall(tag, 128 /* rt_sigtimedwait */));

  BOOST_REQUIRE(::kill(serve.pid, SIGTERM) == 0);
  wait_until(serve.socket_path, "/v1/health",
             [](const http_reply& r) { return r.json()["status"] == "draining"; });
  {
    http_client c(serve.socket_path);
    auto refused = c.post("/v1/exec", {{"code", "print(1)"}});
    BOOST_TEST(refused.status == 503u);
    BOOST_TEST(refused.error_code() == "draining");
  }
  for (pid_t t : tasks)
    ::kill(t, SIGUSR1);
  auto done = in_flight.get();
  BOOST_REQUIRE_MESSAGE(done.status == 200u, done.body);
  BOOST_TEST(done.json()["stdout"] == "waiting\nfinished\n");
  BOOST_TEST(done.json()["error_class"] == "ok");

  BOOST_TEST(serve.wait() == 0);
  BOOST_TEST(::lstat(serve.socket_path.c_str(), &st) != 0);
  BOOST_TEST(errno == ENOENT);
}

BOOST_AUTO_TEST_CASE(the_grace_period_ends_with_a_cancel) {
  serve_process serve({"--drain-grace-ms", "0"});
  serve.first_line();
  const std::string tag = castellan::test::unique_task_name("cksrg");
  auto in_flight = std::async(std::launch::async, [&] {
    http_client c(serve.socket_path);
    return c.post("/v1/exec", {{"code", castellan::test::python_set_task_name(tag) +
                                            "import time; time.sleep(120)"}});
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (castellan::test::tasks_named(tag).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  BOOST_REQUIRE(::kill(serve.pid, SIGTERM) == 0);
  auto r = in_flight.get();
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "cancelled");
  BOOST_TEST(serve.wait() == 0);
  BOOST_TEST(castellan::test::wait_until_no_task_named(tag).empty());
}

BOOST_AUTO_TEST_CASE(a_config_file_makes_the_pools_and_a_broken_one_is_refused) {
  char tmpl[] = "/tmp/castellan-serve-config-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string good = dir + "/good.toml";
  std::ofstream{good} << "state_dir = \"" << dir << "/state\"\n"
                      << "drain_grace_ms = 1000\n\n"
                      << "[[pools]]\nname = \"alpha\"\nsize = 1\nmode = \"shared\"\n";
  {
    serve_process serve({"--config", good});
    BOOST_TEST(serve.first_line() == "castellan: listening on unix:" + serve.socket_path + "\n");
    http_client c(serve.socket_path);
    auto pools = nlohmann::json::parse(c.get("/v1/pools").body);
    BOOST_REQUIRE(pools["pools"].size() == 1u);
    BOOST_TEST(pools["pools"][0]["name"] == "alpha");
    BOOST_TEST(pools["pools"][0]["size"] == 1);
    auto r = c.post("/v1/exec", {{"code", "print(6*7)"}, {"pool", "alpha"}});
    BOOST_TEST(r.status == 200u, r.body);
    BOOST_TEST(nlohmann::json::parse(r.body)["stdout"] == "42\n");
    // The state directory is made, the daemon's own.
    struct stat st {};
    BOOST_REQUIRE(::stat((dir + "/state").c_str(), &st) == 0);
    BOOST_TEST((st.st_mode & 0777) == 0700u);
    BOOST_REQUIRE(::kill(serve.pid, SIGTERM) == 0);
    BOOST_TEST(serve.wait() == 0);
  }
  // Every error of a broken file, by line and key; nothing is started.
  const std::string bad = dir + "/bad.toml";
  std::ofstream{bad} << "[[pools]]\nname = \"alpha\"\nsize = 0\ncolour = \"red\"\n";
  auto refused = castellan::test::run_process(
      {castellan::test::castellan_cli(), "serve", "--config", bad, "--listen",
       "unix:" + dir + "/bad.sock"},
      {}, 60);
  BOOST_TEST(refused.exit_code == 2);
  BOOST_TEST(refused.err.find(bad + ":3:8: pools[0].size: 0: must be between 1 and 1024") !=
                 std::string::npos,
             refused.err);
  BOOST_TEST(refused.err.find(bad + ":4:1: pools[0].colour: \"red\": unknown key") !=
                 std::string::npos,
             refused.err);
  BOOST_TEST(::access((dir + "/bad.sock").c_str(), F_OK) != 0);
  // Pool flags beside a config: which would win is not obvious, so neither.
  auto both = castellan::test::run_process(
      {castellan::test::castellan_cli(), "serve", "--config", good, "--pool-size", "3"}, {}, 60);
  BOOST_TEST(both.exit_code == 2);
  BOOST_TEST(both.err.find("--config describes the pools") != std::string::npos, both.err);
  std::system(("rm -rf '" + dir + "'").c_str());
}

BOOST_AUTO_TEST_CASE(a_second_server_on_a_live_socket_is_refused) {
  serve_process first;
  first.first_line();
  auto second = castellan::test::run_process(
      {castellan::test::castellan_cli(), "serve", "--listen", "unix:" + first.socket_path}, {}, 60);
  BOOST_TEST(second.exit_code == 2);
  BOOST_TEST(second.err.find("another server is listening on '" + first.socket_path + "'") !=
                 std::string::npos,
             second.err);
  // The first one still serves.
  http_client c(first.socket_path);
  BOOST_TEST(c.get("/v1/health").status == 200u);
  BOOST_REQUIRE(::kill(first.pid, SIGTERM) == 0);
  BOOST_TEST(first.wait() == 0);
}

BOOST_AUTO_TEST_CASE(sighup_reloads_the_pools_and_keeps_execs_in_flight) {
  char tmpl[] = "/tmp/castellan-serve-reload-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string file = dir + "/castellan.toml";
  const std::string head = "state_dir = \"" + dir + "/state\"\n\n";
  std::ofstream{file} << head << "[[pools]]\nname = \"a\"\nsize = 1\n\n"
                      << "[[pools]]\nname = \"b\"\nsize = 1\n";
  serve_process serve({"--config", file});
  serve.first_line();
  auto names = [&] {
    http_client c(serve.socket_path);
    std::map<std::string, int> out;
    const auto body = nlohmann::json::parse(c.get("/v1/pools").body);
    for (const auto& p : body["pools"])
      out[p["name"].get<std::string>()] = p["size"].get<int>();
    return out;
  };
  // An exec held on b, which the reload removes.
  const std::string tag = castellan::test::unique_task_name("cksrr");
  const std::string code = castellan::test::python_set_task_name(tag) +
                           "import signal\n"
                           "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                           "print('waiting', flush=True)\n"
                           "signal.sigwait({signal.SIGUSR1})\n"
                           "print('finished')\n";
  auto in_flight = std::async(std::launch::async, [&] {
    http_client c(serve.socket_path);
    return c.post("/v1/exec", {{"code", code}, {"pool", "b"}});
  });
  std::vector<pid_t> tasks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((tasks = castellan::test::tasks_named(tag)).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  BOOST_REQUIRE(castellan::test::wait_until_task_in_syscall(tag, 128 /* rt_sigtimedwait */));

  std::ofstream{file} << head << "[[pools]]\nname = \"a\"\nsize = 2\n\n"
                      << "[[pools]]\nname = \"c\"\nsize = 1\n";
  BOOST_REQUIRE(::kill(serve.pid, SIGHUP) == 0);
  const auto said = serve.wait_for_stderr_line("castellan: SIGHUP: reloaded");
  BOOST_TEST(said.find("added c; removed b; resized a") != std::string::npos, said);
  wait_until(serve.socket_path, "/v1/pools", [](const http_reply& r) {
    const auto body = r.json();
    for (const auto& p : body["pools"])
      if (p["name"] == "a" && p["size"] == 2)
        return true;
    return false;
  });
  BOOST_TEST((names() == std::map<std::string, int>{{"a", 2}, {"c", 1}}));
  {
    http_client c(serve.socket_path);
    auto gone = c.post("/v1/exec", {{"code", "print(1)"}, {"pool", "b"}});
    BOOST_TEST(gone.status == 404u, gone.body);
    BOOST_TEST(gone.error_code() == "unknown_pool");
    auto added = c.post("/v1/exec", {{"code", "print('c')"}, {"pool", "c"}});
    BOOST_TEST(added.status == 200u, added.body);
    BOOST_TEST(added.json()["stdout"] == "c\n");
  }
  // The exec held on b is answered once, with all its output.
  for (pid_t t : tasks)
    ::kill(t, SIGUSR1);
  auto done = in_flight.get();
  BOOST_REQUIRE_MESSAGE(done.status == 200u, done.body);
  BOOST_TEST(done.json()["stdout"] == "waiting\nfinished\n");
  BOOST_TEST(done.json()["error_class"] == "ok");

  // A broken file: every error printed, the pools as they were.
  std::ofstream{file} << head << "[[pools]]\nname = \"a\"\nsize = 0\ncolour = \"red\"\n";
  BOOST_REQUIRE(::kill(serve.pid, SIGHUP) == 0);
  auto refused = serve.wait_for_stderr("the config in force is kept");
  BOOST_TEST(refused.find(file + ":5:8: pools[0].size: 0: must be between 1 and 1024") !=
                 std::string::npos,
             refused);
  BOOST_TEST(refused.find(file + ":6:1: pools[0].colour: \"red\": unknown key") !=
                 std::string::npos,
             refused);
  BOOST_TEST((names() == std::map<std::string, int>{{"a", 2}, {"c", 1}}));
  {
    http_client c(serve.socket_path);
    auto r = c.post("/v1/exec", {{"code", "print(6*7)"}});
    BOOST_TEST(r.status == 200u, r.body);
    BOOST_TEST(r.json()["stdout"] == "42\n");
  }
  BOOST_REQUIRE(::kill(serve.pid, SIGTERM) == 0);
  BOOST_TEST(serve.wait() == 0);
  std::system(("rm -rf '" + dir + "'").c_str());
}

BOOST_AUTO_TEST_CASE(sighup_without_a_config_and_a_killed_servers_socket_is_taken_over) {
  serve_process first;
  first.first_line();
  BOOST_REQUIRE(::kill(first.pid, SIGHUP) == 0);
  first.wait_for_stderr("SIGHUP: no config file to reload");
  {
    http_client c(first.socket_path);
    BOOST_TEST(c.get("/v1/health").json()["status"] == "ok");
  }
  // SIGKILL: no drain, the socket file stays behind, nobody answers on it.
  BOOST_REQUIRE(::kill(first.pid, SIGKILL) == 0);
  BOOST_TEST(first.wait() == 128 + SIGKILL);
  struct stat st {};
  BOOST_REQUIRE(::lstat(first.socket_path.c_str(), &st) == 0);
  serve_process second({}, first.socket_path);
  BOOST_TEST(second.first_line() == "castellan: listening on unix:" + first.socket_path + "\n");
  {
    http_client c(first.socket_path);
    auto r = c.post("/v1/exec", {{"code", "print('again')"}});
    BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
    BOOST_TEST(r.json()["stdout"] == "again\n");
  }
  BOOST_REQUIRE(::kill(second.pid, SIGTERM) == 0);
  BOOST_TEST(second.wait() == 0);
  BOOST_TEST(::lstat(first.socket_path.c_str(), &st) != 0);
}

BOOST_AUTO_TEST_SUITE_END()
