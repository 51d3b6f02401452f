// `castellan serve` with a tokens file: bearer tokens on TCP, the unix
// socket's permissions as its authentication, pool allowlists and
// per-token limits; and the config rules that keep an unauthenticated
// listener off the network.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/process_scan.hpp"
#include "support/run_process.hpp"
#include "support/tcp_http.hpp"
#include "support/test_certificate.hpp"

using castellan::test::header_list;
using castellan::test::http_client;
using castellan::test::run_process;
using castellan::test::tcp_request;
using castellan::test::tls_request;

namespace {

/// A private directory (0700), removed afterwards.
struct work_dir {
  std::string path;
  work_dir() {
    char tmpl[] = "/tmp/castellan-auth-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~work_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
  std::string write(const std::string& name, const std::string& text, mode_t mode = 0600) const {
    const std::string file = path + "/" + name;
    std::ofstream(file, std::ios::binary) << text;
    ::chmod(file.c_str(), mode);
    return file;
  }
};

/// `castellan token new`: the token (its stderr's last line) and the entry
/// (its stdout).
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

/// A running `castellan serve`; its stdout and stderr on pipes.
struct daemon_process {
  pid_t pid = -1;
  int out = -1;
  int err = -1;
  int exit_status = -1;
  std::string err_seen;

  explicit daemon_process(const std::vector<std::string>& args) {
    std::vector<std::string> argv = {castellan::test::castellan_cli(), "serve"};
    argv.insert(argv.end(), args.begin(), args.end());
    int o[2], e[2];
    BOOST_REQUIRE(::pipe2(o, O_CLOEXEC) == 0 && ::pipe2(e, O_CLOEXEC) == 0);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(o[1], 1);
      ::dup2(e[1], 2);
      std::vector<char*> v;
      for (auto& a : argv)
        v.push_back(a.data());
      v.push_back(nullptr);
      ::execv(v[0], v.data());
      ::_exit(127);
    }
    ::close(o[1]);
    ::close(e[1]);
    out = o[0];
    err = e[0];
  }

  /// The next line on stdout (30 s safety net).
  std::string line() {
    std::string l;
    char c;
    while (l.empty() || l.back() != '\n') {
      pollfd p{out, POLLIN, 0};
      BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "castellan serve printed no line: " << l);
      BOOST_REQUIRE_MESSAGE(::read(out, &c, 1) == 1, "stdout closed: " << l << drain_err());
      l += c;
    }
    l.pop_back();
    return l;
  }

  /// The port of the listener the line `castellan: listening on tcp:…:PORT` names.
  uint16_t port_of(const std::string& listening) {
    return static_cast<uint16_t>(std::stoul(listening.substr(listening.rfind(':') + 1)));
  }

  /// What it wrote on stderr so far (without waiting).
  std::string drain_err() {
    char buf[4096];
    for (;;) {
      pollfd p{err, POLLIN, 0};
      if (::poll(&p, 1, 0) != 1)
        break;
      ssize_t n = ::read(err, buf, sizeof buf);
      if (n <= 0)
        break;
      err_seen.append(buf, static_cast<std::size_t>(n));
    }
    return err_seen;
  }

  /// Waits until stderr has said `text` on a whole line (30 s safety net).
  void wait_err(const std::string& text) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      const auto at = drain_err().find(text);
      if (at != std::string::npos && err_seen.find('\n', at) != std::string::npos)
        return;
      BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                            "stderr never said '" << text << "': " << err_seen);
      pollfd p{err, POLLIN, 0};
      ::poll(&p, 1, 100);
    }
  }

  int stop() {
    if (exit_status >= 0)
      return exit_status;
    ::kill(pid, SIGTERM);
    for (int i = 0; i < 6000 && exit_status < 0; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (exit_status < 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      BOOST_FAIL("castellan serve did not exit within 60 s");
    }
    drain_err();
    return exit_status;
  }

  ~daemon_process() {
    if (exit_status < 0 && pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    ::close(out);
    ::close(err);
  }
};

header_list bearer(const std::string& token) {
  return {{"Authorization", "Bearer " + token}};
}

/// An exec that runs until the test sends its process SIGUSR1.
std::string held_code(const std::string& tag) {
  return castellan::test::python_set_task_name(tag) +
         "import signal\n"
         "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
         "signal.sigwait({signal.SIGUSR1})\n"
         "print('released')\n";
}

std::vector<pid_t> wait_for_task(const std::string& tag) {
  std::vector<pid_t> tasks;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while ((tasks = castellan::test::tasks_named(tag)).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  BOOST_REQUIRE(castellan::test::wait_until_task_in_syscall(tag, 128 /* rt_sigtimedwait */));
  return tasks;
}

std::string exec_body(const std::string& code, const std::string& pool = {}) {
  nlohmann::json j{{"code", code}};
  if (!pool.empty())
    j["pool"] = pool;
  return j.dump();
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_serve_auth)

BOOST_AUTO_TEST_CASE(tokens_guard_tcp_and_a_token_has_its_pools_and_its_limit) {
  work_dir dir;
  auto ci = make_token({"--name", "ci", "--pools", "alpha", "--max-concurrent", "1"});
  auto ops = make_token({"--name", "ops"});
  auto b_only = make_token({"--name", "b-only", "--pools", "beta"});
  BOOST_TEST(ci.token.rfind("cst_", 0) == 0u, ci.token);
  BOOST_TEST(ci.entry.find("name = \"ci\"\n") != std::string::npos, ci.entry);
  BOOST_TEST(ci.entry.find("pools = [\"alpha\"]\n") != std::string::npos, ci.entry);
  BOOST_TEST(ci.entry.find("max_concurrent = 1\n") != std::string::npos, ci.entry);
  BOOST_TEST(ci.entry.find(ci.token) == std::string::npos, "the entry holds the hash only");
  dir.write("tokens.toml", ci.entry + "\n" + ops.entry + "\n" + b_only.entry);
  const std::string sock = dir.path + "/api.sock";
  const std::string config =
      dir.write("castellan.toml",
                "listen = [\"unix:" + sock +
                    "\", \"tcp:127.0.0.1:0\"]\n"
                    "state_dir = \"" +
                    dir.path +
                    "/state\"\n"
                    "[auth]\ntokens_file = \"tokens.toml\"\n"
                    "allow_plaintext_loopback = true\n"
                    "[audit]\nfile = \"audit.jsonl\"\nevents = [\"exec_start\"]\n"
                    "[[pools]]\nname = \"alpha\"\nsize = 1\nmode = \"shared\"\n"
                    "[[pools]]\nname = \"beta\"\nsize = 1\nmode = \"shared\"\n",
                0644);
  daemon_process d({"--config", config});
  BOOST_TEST(d.line() == "castellan: listening on unix:" + sock);
  const std::string tcp_line = d.line();
  BOOST_TEST(tcp_line.rfind("castellan: listening on tcp:127.0.0.1:", 0) == 0u, tcp_line);
  const uint16_t port = d.port_of(tcp_line);

  // No token, a wrong one, the right one.
  auto none = tcp_request(port, "GET", "/v1/pools");
  BOOST_TEST(none.status == 401u);
  BOOST_TEST(none.error_code() == "unauthorized");
  BOOST_TEST(none.www_authenticate == "Bearer realm=\"castellan\"");
  auto wrong = tcp_request(port, "POST", "/v1/exec", exec_body("print(1)"),
                           bearer(ci.token.substr(0, ci.token.size() - 1) + "x"));
  BOOST_TEST(wrong.status == 401u);
  BOOST_TEST(wrong.www_authenticate.find("error=\"invalid_token\"") != std::string::npos);
  // What a client says of itself is not its origin: proxy headers are not
  // believed, and a body cannot carry one.
  auto forged_headers = bearer(ci.token);
  forged_headers.emplace_back("X-Forwarded-For", "203.0.113.9");
  forged_headers.emplace_back("Forwarded", "for=203.0.113.9");
  auto ok = tcp_request(port, "POST", "/v1/exec", exec_body("print(6*7)"), forged_headers);
  BOOST_REQUIRE_MESSAGE(ok.status == 200u, ok.body);
  auto forged_body = tcp_request(port, "POST", "/v1/exec",
                                 R"j({"code":"print(1)","origin":{"peer":"x","token":"ops"}})j",
                                 bearer(ci.token));
  BOOST_TEST(forged_body.status == 400u, forged_body.body);
  BOOST_TEST(ok.json()["stdout"] == "42\n");

  // A token sees the pools it may use, and no daemon-wide view; one
  // without an allowlist sees everything.
  auto names_of = [](const castellan::test::tcp_reply& r) {
    std::vector<std::string> names;
    const auto body = r.json();
    for (const auto& p : body["pools"])
      names.push_back(p["name"].get<std::string>());
    return names;
  };
  auto ci_pools = tcp_request(port, "GET", "/v1/pools", "", bearer(ci.token));
  BOOST_TEST(ci_pools.status == 200u, ci_pools.body);
  BOOST_TEST((names_of(ci_pools) == std::vector<std::string>{"alpha"}), ci_pools.body);
  auto ops_pools = tcp_request(port, "GET", "/v1/pools", "", bearer(ops.token));
  BOOST_TEST((names_of(ops_pools) == std::vector<std::string>{"alpha", "beta"}), ops_pools.body);
  for (const char* wide : {"/v1/status", "/metrics"}) {
    auto refused = tcp_request(port, "GET", wide, "", bearer(ci.token));
    BOOST_TEST(refused.status == 403u, wide);
    BOOST_TEST(refused.error_code() == "pool_not_allowed", wide);
    BOOST_TEST(refused.error_message() == "token 'ci' may use only some pools; " +
                                              std::string(wide) +
                                              " shows every pool (GET /v1/pools shows yours)");
    BOOST_TEST(tcp_request(port, "GET", wide, "", bearer(ops.token)).status == 200u, wide);
  }

  // ci may use alpha (the default, the config's first) only.
  auto beta =
      tcp_request(port, "POST", "/v1/exec", exec_body("print(1)", "beta"), bearer(ci.token));
  BOOST_TEST(beta.status == 403u);
  BOOST_TEST(beta.error_code() == "pool_not_allowed");
  BOOST_TEST(beta.error_message() == "token 'ci' may not use pool 'beta'");
  auto ops_beta =
      tcp_request(port, "POST", "/v1/exec", exec_body("print(2)", "beta"), bearer(ops.token));
  BOOST_TEST(ops_beta.status == 200u, ops_beta.body);

  // A request policy may run in a pool made from the default pool: a token
  // that may not use that one may not bring a policy, whatever pool it names.
  auto b_plain =
      tcp_request(port, "POST", "/v1/exec", exec_body("print(1)", "beta"), bearer(b_only.token));
  BOOST_TEST(b_plain.status == 200u, b_plain.body);
  nlohmann::json with_policy = {
      {"code", "print(1)"}, {"pool", "beta"}, {"policy", {{"extends", "default"}}}};
  auto b_policy = tcp_request(port, "POST", "/v1/exec", with_policy.dump(), bearer(b_only.token));
  BOOST_TEST(b_policy.status == 403u);
  BOOST_TEST(b_policy.error_code() == "pool_not_allowed");
  BOOST_TEST(b_policy.error_message().find("may not use pool 'alpha'") != std::string::npos,
             b_policy.body);

  // One exec of ci in flight: the next is 429, another token's is not.
  const std::string tag = castellan::test::unique_task_name("ckauth");
  auto held = std::async(std::launch::async, [&] {
    return tcp_request(port, "POST", "/v1/exec", exec_body(held_code(tag)), bearer(ci.token));
  });
  auto tasks = wait_for_task(tag);
  auto beyond = tcp_request(port, "POST", "/v1/exec", exec_body("print(3)"), bearer(ci.token));
  BOOST_TEST(beyond.status == 429u);
  BOOST_TEST(beyond.error_code() == "too_many_execs");
  auto ops_too =
      tcp_request(port, "POST", "/v1/exec", exec_body("print(4)", "beta"), bearer(ops.token));
  BOOST_TEST(ops_too.status == 200u, ops_too.body);
  for (pid_t t : tasks)
    ::kill(t, SIGUSR1);
  auto released = held.get();
  BOOST_REQUIRE_MESSAGE(released.status == 200u, released.body);
  BOOST_TEST(released.json()["stdout"] == "released\n");
  auto after = tcp_request(port, "POST", "/v1/exec", exec_body("print(5)"), bearer(ci.token));
  BOOST_TEST(after.status == 200u, after.body);

  // The unix socket: its permissions are the authentication; a token sent
  // there must be valid, and then its allowlist applies.
  {
    http_client c(sock);
    auto r = c.post("/v1/exec", {{"code", "print('owner')"}, {"pool", "beta"}});
    BOOST_TEST(r.status == 200u, r.body);
    c.send_raw("GET /v1/pools HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer cst_nope\r\n\r\n");
    BOOST_TEST(c.read().status == 401u);
  }
  {
    http_client c(sock);
    const std::string body = exec_body("print(1)", "beta");
    c.send_raw("POST /v1/exec HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer " + ci.token +
               "\r\nContent-Type: application/json\r\nContent-Length: " +
               std::to_string(body.size()) + "\r\n\r\n" + body);
    BOOST_TEST(c.read().error_code() == "pool_not_allowed");
  }
  BOOST_TEST(d.stop() == 0);
  // No token reached the daemon's output.
  for (const auto* t : {&ci.token, &ops.token})
    BOOST_TEST(d.err_seen.find(*t) == std::string::npos, d.err_seen);

  // The audit log names who asked for each exec: the token's name and the
  // TCP peer, or the unix socket's peer credentials.
  std::ifstream log(dir.path + "/state/audit.jsonl");
  BOOST_REQUIRE(log.good());
  std::map<std::string, int> by_token;
  int unix_owner = 0;
  std::string line;
  while (std::getline(log, line)) {
    const auto rec = nlohmann::json::parse(line);
    if (rec["kind"] != "exec_start")
      continue;
    const auto& origin = rec["origin"];
    BOOST_REQUIRE_MESSAGE(origin.is_object(), line);
    const std::string peer = origin["peer"];
    if (origin["token"].is_string()) {
      ++by_token[origin["token"].get<std::string>()];
      BOOST_TEST(peer.rfind("tcp 127.0.0.1:", 0) == 0u, line);
    } else {
      BOOST_TEST(peer == "unix uid=" + std::to_string(::getuid()) + " gid=" +
                             std::to_string(::getgid()) + " pid=" + std::to_string(::getpid()),
                 line);
      ++unix_owner;
    }
    BOOST_TEST(line.find(ci.token) == std::string::npos, "a token reached the audit log");
    BOOST_TEST(line.find("203.0.113.9") == std::string::npos, line);
  }
  // ci: print(6*7), the held exec and print(5); ops: beta twice; b-only once.
  BOOST_TEST((by_token == std::map<std::string, int>{{"ci", 3}, {"ops", 2}, {"b-only", 1}}));
  BOOST_TEST(unix_owner == 1);
}

BOOST_AUTO_TEST_CASE(sighup_rereads_the_tokens_file) {
  work_dir dir;
  auto stays = make_token({"--name", "stays", "--max-concurrent", "2"});
  auto revoked = make_token({"--name", "revoked"});
  auto added = make_token({"--name", "added"});
  dir.write("tokens.toml", stays.entry + "\n" + revoked.entry);
  const std::string config =
      dir.write("castellan.toml",
                "listen = [\"tcp:127.0.0.1:0\"]\n"
                "state_dir = \"" +
                    dir.path +
                    "/state\"\n"
                    "[auth]\ntokens_file = \"tokens.toml\"\n"
                    "allow_plaintext_loopback = true\n"
                    // two workers held, one for the execs meanwhile
                    "[[pools]]\nname = \"alpha\"\nsize = 3\nmode = \"shared\"\n",
                0644);
  daemon_process d({"--config", config});
  const uint16_t port = d.port_of(d.line());
  auto exec_as = [&](const new_token& t, const std::string& code) {
    return tcp_request(port, "POST", "/v1/exec", exec_body(code), bearer(t.token));
  };
  BOOST_TEST(exec_as(added, "print(0)").status == 401u, "not in the file yet");
  // One exec of each token that is in the file, held through the reload.
  const std::string tag_s = castellan::test::unique_task_name("cktks");
  const std::string tag_r = castellan::test::unique_task_name("cktkr");
  auto held_s = std::async(std::launch::async, [&] { return exec_as(stays, held_code(tag_s)); });
  auto held_r = std::async(std::launch::async, [&] { return exec_as(revoked, held_code(tag_r)); });
  const auto tasks = wait_for_task(tag_s);
  wait_for_task(tag_r);

  // The new file: `revoked` is gone, `added` arrives, `stays` may have one
  // exec in flight where it had two.
  auto narrowed = stays.entry;
  narrowed.replace(narrowed.find("max_concurrent = 2"), 18, "max_concurrent = 1");
  dir.write("tokens.toml", narrowed + "\n" + added.entry);
  BOOST_REQUIRE(::kill(d.pid, SIGHUP) == 0);
  d.wait_err("castellan: SIGHUP: tokens: 2 from " + dir.path + "/tokens.toml");

  auto gone = exec_as(revoked, "print(1)");
  BOOST_TEST(gone.status == 401u, gone.body);
  BOOST_TEST(gone.www_authenticate.find("error=\"invalid_token\"") != std::string::npos);
  auto fresh = exec_as(added, "print(2)");
  BOOST_TEST(fresh.status == 200u, fresh.body);
  BOOST_TEST(fresh.json()["stdout"] == "2\n");
  // `stays` has its held exec counted against its new limit of 1.
  auto beyond = exec_as(stays, "print(3)");
  BOOST_TEST(beyond.status == 429u, beyond.body);
  BOOST_TEST(beyond.error_message() == "token 'stays' has 1 execs in flight, its max_concurrent");

  // The revoked token's held exec was cancelled by the reload: nobody
  // releases it.
  auto cut = held_r.get();
  BOOST_TEST(cut.status == 200u, cut.body);
  BOOST_TEST(cut.json()["error_class"] == "cancelled", cut.body);
  BOOST_TEST(cut.json()["exit_code"] == 125, cut.body);
  // The held exec of `stays` runs on and finishes; then `stays` has room
  // again.
  for (pid_t t : tasks)
    ::kill(t, SIGUSR1);
  auto kept = held_s.get();
  BOOST_TEST(kept.status == 200u, kept.body);
  BOOST_TEST(kept.json()["stdout"] == "released\n");
  BOOST_TEST(exec_as(stays, "print(4)").status == 200u);

  // A tokens file that does not load keeps the tokens in force.
  dir.write("tokens.toml", "[[tokens]]\nname = \"broken\"\n");
  BOOST_REQUIRE(::kill(d.pid, SIGHUP) == 0);
  d.wait_err("the config in force is kept");
  BOOST_TEST(exec_as(added, "print(5)").status == 200u);
  BOOST_TEST(exec_as(revoked, "print(6)").status == 401u);
  BOOST_TEST(d.stop() == 0);
  for (const auto* t : {&stays.token, &revoked.token, &added.token})
    BOOST_TEST(d.err_seen.find(*t) == std::string::npos, d.err_seen);
}

BOOST_AUTO_TEST_CASE(sighup_narrows_what_a_token_sees_and_names) {
  work_dir dir;
  auto ci = make_token({"--name", "ci", "--pools", "alpha"});
  auto ops = make_token({"--name", "ops"});
  dir.write("tokens.toml", ci.entry + "\n" + ops.entry);
  const std::string config_head = "listen = [\"tcp:127.0.0.1:0\"]\n"
                                  "state_dir = \"" +
                                  dir.path +
                                  "/state\"\n"
                                  "[auth]\ntokens_file = \"tokens.toml\"\n"
                                  "allow_plaintext_loopback = true\n"
                                  "[audit]\nfile = \"audit.jsonl\"\n";
  const std::string config = dir.write(
      "castellan.toml",
      config_head + "[[pools]]\nname = \"alpha\"\nsize = 1\nmode = \"shared\"\n"
                    "[[pools]]\nname = \"beta\"\nsize = 1\nmode = \"shared\"\npolicy = \"strict\"\n",
      0644);
  daemon_process d({"--config", config});
  const uint16_t port = d.port_of(d.line());
  auto explain = [&](const new_token& t, const std::string& name) {
    return tcp_request(port, "POST", "/v1/policies/explain",
                       nlohmann::json{{"name", name}, {"exec", "/usr/bin/id"}}.dump(),
                       bearer(t.token));
  };
  // ci's pool alpha follows `default`: it names that one, not beta's.
  BOOST_TEST(explain(ci, "default").status == 200u);
  auto refused = explain(ci, "strict");
  BOOST_TEST(refused.status == 403u, refused.body);
  BOOST_TEST(refused.error_code() == "policy_not_allowed");
  BOOST_TEST(explain(ops, "strict").status == 200u);

  // An audit stream of ci, open across the reload.
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  castellan::test::detail::safety_net(sock.native_handle());
  net::write(sock, net::buffer("GET /v1/audit HTTP/1.1\r\nHost: localhost\r\nAuthorization: "
                               "Bearer " +
                               ci.token + "\r\n\r\n"));
  std::string seen;
  bool closed = false;
  auto read_to = [&](const std::string& text) {
    char buf[4096];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (seen.find(text) == std::string::npos && std::chrono::steady_clock::now() < deadline) {
      boost::system::error_code ec;
      const std::size_t got = sock.read_some(net::buffer(buf), ec);
      seen.append(buf, got);
      if (ec) {
        closed = ec == net::error::eof;
        break;
      }
    }
  };
  read_to("event: live\n");
  BOOST_TEST_REQUIRE(seen.rfind("HTTP/1.1 200 OK\r\n", 0) == 0u, seen);

  // ci moves to beta: its stream ends, and it names beta's policy only.
  auto moved = ci.entry;
  moved.replace(moved.find("pools = [\"alpha\"]"), 17, "pools = [\"beta\"]");
  dir.write("tokens.toml", moved + "\n" + ops.entry);
  BOOST_REQUIRE(::kill(d.pid, SIGHUP) == 0);
  d.wait_err("castellan: SIGHUP: tokens: 2 from " + dir.path + "/tokens.toml");
  read_to("\x01"); // to the end
  BOOST_TEST(closed, seen);
  BOOST_TEST(seen.find("event: end\ndata: {\"reason\":\"the pools of token 'ci' changed: "
                       "reconnect to see what they are now\",\"v\":1}") != std::string::npos,
             seen);
  BOOST_TEST(explain(ci, "strict").status == 200u);
  BOOST_TEST(explain(ci, "default").status == 403u);
  BOOST_TEST(d.stop() == 0);
}

BOOST_AUTO_TEST_CASE(plain_tcp_needs_loopback_and_the_configs_consent) {
  work_dir dir;
  const std::string state = "state_dir = \"" + dir.path + "/state\"\n";
  auto check = [&](const std::string& name, const std::string& text) {
    const std::string file = dir.write(name, text, 0644);
    return run_process({castellan::test::castellan_cli(), "serve", "--config", file}, {}, 60);
  };
  auto no_consent = check("a.toml", "listen = [\"tcp:127.0.0.1:0\"]\n" + state);
  BOOST_TEST(no_consent.exit_code == 2);
  BOOST_TEST(no_consent.err.find(dir.path + "/a.toml:1:11: listen[0]: \"tcp:127.0.0.1:0\": plain "
                                            "TCP on loopback lets any local user connect") !=
                 std::string::npos,
             no_consent.err);
  auto remote = check("b.toml", "listen = [\"tcp:0.0.0.0:0\"]\n" + state +
                                    "[auth]\nallow_plaintext_loopback = true\n");
  BOOST_TEST(remote.exit_code == 2);
  BOOST_TEST(remote.err.find("listen[0]: \"tcp:0.0.0.0:0\": not a loopback address") !=
                 std::string::npos,
             remote.err);
  // --listen given beside a config follows the config's rules.
  const std::string fine = dir.write("c.toml", state, 0644);
  auto flag = run_process(
      {castellan::test::castellan_cli(), "serve", "--config", fine, "--listen", "tcp:127.0.0.1:0"},
      {}, 60);
  BOOST_TEST(flag.exit_code == 2);
  BOOST_TEST(flag.err.find("--listen tcp:127.0.0.1:0: plain TCP on loopback") != std::string::npos,
             flag.err);
}

BOOST_AUTO_TEST_CASE(without_a_config_plain_loopback_tcp_is_served_and_said_unauthenticated) {
  daemon_process d({"--listen", "tcp:127.0.0.1:0", "--pool-size", "1"});
  const std::string l = d.line();
  const uint16_t port = d.port_of(l);
  auto r = tcp_request(port, "GET", "/v1/health");
  BOOST_TEST(r.status == 200u);
  BOOST_TEST(d.stop() == 0);
  BOOST_TEST(d.err_seen.find(l.substr(std::string("castellan: listening on ").size()) +
                             " is unauthenticated: any local user can run code through it") !=
                 std::string::npos,
             d.err_seen);
  auto remote = run_process(
      {castellan::test::castellan_cli(), "serve", "--listen", "tcp:0.0.0.0:0", "--pool-size", "1"},
      {}, 60);
  BOOST_TEST(remote.exit_code == 2);
  BOOST_TEST(remote.err.find("not a loopback address") != std::string::npos, remote.err);
}

BOOST_AUTO_TEST_CASE(a_tls_listener_serves_https_with_tokens) {
  work_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  auto ci = make_token({"--name", "ci", "--pools", "alpha"});
  dir.write("tokens.toml", ci.entry);
  const std::string sock = dir.path + "/api.sock";
  const std::string config =
      dir.write("castellan.toml",
                "listen = [\"unix:" + sock +
                    "\", \"tls:127.0.0.1:0\"]\n"
                    "state_dir = \"" +
                    dir.path +
                    "/state\"\n"
                    "[auth]\ntokens_file = \"tokens.toml\"\n"
                    "[tls]\ncert_file = \"cert.pem\"\nkey_file = \"cert-key.pem\"\n"
                    "[[pools]]\nname = \"alpha\"\nsize = 1\nmode = \"shared\"\n"
                    "[[pools]]\nname = \"beta\"\nsize = 1\nmode = \"shared\"\n",
                0644);
  daemon_process d({"--config", config});
  BOOST_TEST(d.line() == "castellan: listening on unix:" + sock);
  const std::string tls_line = d.line();
  BOOST_TEST(tls_line.rfind("castellan: listening on tls:127.0.0.1:", 0) == 0u, tls_line);
  const uint16_t port = d.port_of(tls_line);
  const std::string ca = cert.cert_file;

  auto none = tls_request(port, ca, "GET", "/v1/health");
  BOOST_REQUIRE_MESSAGE(!none.error, none.error.message());
  BOOST_TEST(none.status == 401u);
  BOOST_TEST(none.www_authenticate == "Bearer realm=\"castellan\"");
  auto wrong = tls_request(port, ca, "GET", "/v1/pools", {}, bearer("cst_" + std::string(43, 'A')));
  BOOST_TEST(wrong.status == 401u);
  auto ok = tls_request(port, ca, "POST", "/v1/exec", exec_body("print(6*7)"), bearer(ci.token));
  BOOST_REQUIRE_MESSAGE(ok.status == 200u, ok.body);
  BOOST_TEST(ok.json()["stdout"] == "42\n");
  auto beta =
      tls_request(port, ca, "POST", "/v1/exec", exec_body("print(1)", "beta"), bearer(ci.token));
  BOOST_TEST(beta.status == 403u);
  BOOST_TEST(beta.error_code() == "pool_not_allowed");
  // Over TLS the Host is any name the client used (no DNS-rebinding check:
  // a page cannot send the token).
  auto named = tls_request(port, ca, "GET", "/v1/health", {},
                           {{"Authorization", "Bearer " + ci.token}, {"Host", "api.example.com"}});
  BOOST_TEST(named.status == 200u, named.body);

  // curl, as a client would use it.
  auto curl =
      run_process({"/usr/bin/curl", "-s", "--cacert", ca, "-H", "Authorization: Bearer " + ci.token,
                   "-H", "Content-Type: application/json", "-d", exec_body("print('curl')"),
                   "https://localhost:" + std::to_string(port) + "/v1/exec"},
                  {}, 60);
  BOOST_TEST_REQUIRE(curl.exit_code == 0, curl.err);
  BOOST_TEST(nlohmann::json::parse(curl.out)["stdout"] == "curl\n");

  // A plain HTTP client on the TLS port gets no answer, only a close.
  auto plain = tcp_request(port, "GET", "/v1/health", {}, bearer(ci.token));
  BOOST_TEST(plain.status == 0u);
  BOOST_TEST(bool(plain.error));
  // curl without the CA refuses the self-signed certificate: the server is
  // what it says only with the certificate the client trusts.
  auto untrusted = run_process(
      {"/usr/bin/curl", "-s", "https://localhost:" + std::to_string(port) + "/v1/health"}, {}, 60);
  BOOST_TEST(untrusted.exit_code == 60); // CURLE_PEER_FAILED_VERIFICATION

  BOOST_TEST(d.stop() == 0);
  BOOST_TEST(d.err_seen.find(ci.token) == std::string::npos, d.err_seen);
  BOOST_TEST(d.err_seen.find("unauthenticated") == std::string::npos, d.err_seen);
}

BOOST_AUTO_TEST_CASE(a_listener_off_loopback_needs_tls_and_tokens) {
  work_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  dir.write("tokens.toml", "");
  const std::string state = "state_dir = \"" + dir.path + "/state\"\n";
  const std::string tls = "[tls]\ncert_file = \"cert.pem\"\nkey_file = \"cert-key.pem\"\n";
  auto serve = [&](const std::string& name, const std::string& text) {
    const std::string file = dir.write(name, text, 0644);
    return run_process({castellan::test::castellan_cli(), "serve", "--config", file}, {}, 60);
  };
  auto plain = serve("a.toml", "listen = [\"tcp:0.0.0.0:0\"]\n" + state + tls +
                                   "[auth]\ntokens_file = \"tokens.toml\"\n");
  BOOST_TEST(plain.exit_code == 2);
  BOOST_TEST(plain.err.find("a.toml:1:11: listen[0]: \"tcp:0.0.0.0:0\": not a loopback address: "
                            "plain TCP listens on loopback only; elsewhere use TLS") !=
                 std::string::npos,
             plain.err);
  auto no_tls = serve("b.toml", "listen = [\"tls:0.0.0.0:0\"]\n" + state +
                                    "[auth]\ntokens_file = \"tokens.toml\"\n");
  BOOST_TEST(no_tls.exit_code == 2);
  BOOST_TEST(no_tls.err.find("listen[0]: \"tls:0.0.0.0:0\": a TLS listener needs [tls] cert_file "
                             "and key_file") != std::string::npos,
             no_tls.err);
  auto no_tokens = serve("c.toml", "listen = [\"tls:0.0.0.0:0\"]\n" + state + tls);
  BOOST_TEST(no_tokens.exit_code == 2);
  BOOST_TEST(no_tokens.err.find("a TLS listener needs auth.tokens_file") != std::string::npos,
             no_tokens.err);
  // Without a config there is no certificate: --listen tls: is refused.
  auto cli = run_process({castellan::test::castellan_cli(), "serve", "--listen", "tls:127.0.0.1:0",
                          "--pool-size", "1"},
                         {}, 60);
  BOOST_TEST(cli.exit_code == 2);
  BOOST_TEST(cli.err.find("a TLS listener needs a config") != std::string::npos, cli.err);
}

BOOST_AUTO_TEST_SUITE_END()
