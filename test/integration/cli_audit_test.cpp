// The live audit of a real `castellan serve` (GET /v1/audit): `castellan
// audit tail --connect` prints the records of execs run meanwhile, as the
// file mode does, with the same filters, and ends cleanly on Ctrl-C; with
// --since it prints what the daemon's file holds. And how long an exec_end
// record takes from the exec's end to an SSE client (printed, not
// asserted).

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/run_process.hpp"
#include "support/serve_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::http_client;
using castellan::test::run_process;
using castellan::test::serve_process;
using json = nlohmann::json;

namespace {

/// A directory with a castellan.toml whose daemon audits every exec to
/// state/audit.jsonl.
struct audited_config {
  std::string dir;
  std::string path;
  audited_config() {
    char tmpl[] = "/tmp/castellan-audit-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    path = dir + "/castellan.toml";
    std::ofstream(path) << "state_dir = \"" << dir << "/state\"\n"
                        << "[audit]\nfile = \"audit.jsonl\"\nfsync = \"never\"\nevents = [\"*\"]\n"
                        << "[[pools]]\nname = \"default\"\nsize = 2\n";
  }
  ~audited_config() { std::system(("rm -rf '" + dir + "'").c_str()); }
};

struct audited_daemon {
  audited_config config;
  serve_process serve{{"--config", config.path}};
  std::string target = "unix:" + serve.socket_path;

  audited_daemon() {
    BOOST_REQUIRE(serve.first_line() == "castellan: listening on " + target + "\n");
  }

  /// Runs `code` on the daemon; its exec id.
  uint64_t exec(const std::string& code) {
    http_client c(serve.socket_path);
    auto r = c.post("/v1/exec", {{"code", code}});
    BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
    return r.json()["exec_id"].get<uint64_t>();
  }
};

/// A child process whose stdout is read as it comes.
struct child {
  pid_t pid = -1;
  int out = -1;
  std::string seen;

  explicit child(std::vector<std::string> args) {
    int fds[2];
    BOOST_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], 1);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    out = fds[0];
  }

  /// Reads what arrives within `ms`; false at EOF.
  bool read_for(int ms) {
    pollfd p{out, POLLIN, 0};
    if (::poll(&p, 1, ms) <= 0)
      return true;
    char buf[4096];
    const auto n = ::read(out, buf, sizeof(buf));
    if (n <= 0)
      return false;
    seen.append(buf, static_cast<std::size_t>(n));
    return true;
  }

  /// Waits for the exit (30 s safety net, then SIGKILL); the status.
  int wait() {
    int status = 0;
    for (int i = 0; i < 3000; ++i) {
      if (::waitpid(pid, &status, WNOHANG) == pid) {
        pid = -1;
        for (int k = 0; k < 100 && read_for(100);)
          ++k; // what it wrote before it exited, up to EOF
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    pid = -1;
    BOOST_FAIL("the child did not exit");
    return -1;
  }

  ~child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out >= 0)
      ::close(out);
  }
};

/// CLOCK_REALTIME in nanoseconds.
int64_t realtime_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

/// A record's `ts` ("2026-11-26T06:41:07.310551812Z", what the audit
/// writes) in nanoseconds since the epoch.
int64_t parse_ts(const std::string& ts) {
  std::tm tm{};
  BOOST_REQUIRE(::strptime(ts.c_str(), "%Y-%m-%dT%H:%M:%S", &tm) != nullptr);
  int64_t ns = int64_t{::timegm(&tm)} * 1'000'000'000;
  const auto dot = ts.find('.');
  if (dot != std::string::npos) {
    std::string frac = ts.substr(dot + 1, ts.find('Z') - dot - 1);
    frac.resize(9, '0');
    ns += std::stoll(frac);
  }
  return ns;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(cli_audit, audited_daemon)

BOOST_AUTO_TEST_CASE(tail_follow_connect_prints_the_execs_run_meanwhile_and_ctrl_c_ends_it) {
  for (bool as_json : {false, true}) {
    BOOST_TEST_CONTEXT(std::string(as_json ? "--json" : "pretty")) {
      std::vector<std::string> args = {castellan_cli(), "audit", "tail",   "-f",
                                       "--connect",     target,  "--kind", "exec_end"};
      if (as_json)
        args.push_back("--json");
      child tail(args);
      // Execs until one shows up: the first may come before the
      // subscription does.
      uint64_t shown = 0;
      for (int i = 0; i < 100 && shown == 0; ++i) {
        const uint64_t id = exec("print(" + std::to_string(i) + ")");
        for (int k = 0; k < 10 && shown == 0; ++k) {
          tail.read_for(50);
          for (uint64_t x = 1; x <= id && shown == 0; ++x)
            if (contains(tail.seen, as_json ? "\"exec_id\":" + std::to_string(x) + ","
                                            : "exec=" + std::to_string(x) + " "))
              shown = x;
        }
      }
      BOOST_TEST_REQUIRE(shown != 0u, tail.seen);
      // A later exec shows up too, and its exec_start does not (--kind).
      const uint64_t later = exec("print('later')");
      for (int k = 0; k < 600; ++k) {
        if (contains(tail.seen, as_json ? "\"exec_id\":" + std::to_string(later) + ","
                                        : "exec=" + std::to_string(later) + " "))
          break;
        tail.read_for(50);
      }
      BOOST_TEST(contains(tail.seen, as_json ? "\"exec_id\":" + std::to_string(later) + ","
                                             : "exec=" + std::to_string(later) + " "),
                 tail.seen);
      BOOST_TEST(!contains(tail.seen, "exec_start"), tail.seen);
      if (as_json) {
        // Each line is the record exactly: JSON with kind exec_end.
        std::size_t start = 0;
        for (auto nl = tail.seen.find('\n'); nl != std::string::npos;
             start = nl + 1, nl = tail.seen.find('\n', start)) {
          auto j = json::parse(tail.seen.substr(start, nl - start));
          BOOST_TEST(j["kind"] == "exec_end");
        }
      } else {
        BOOST_TEST(contains(tail.seen, "exec_end"), tail.seen);
      }
      ::kill(tail.pid, SIGINT);
      BOOST_TEST(tail.wait() == 0, "Ctrl-C ends the tail cleanly");
    }
  }
}

BOOST_AUTO_TEST_CASE(tail_connect_since_prints_what_the_daemon_holds_and_stops) {
  const uint64_t a = exec("print('a')");
  const uint64_t b = exec("print('b')");
  // CASTELLAN_CONNECT instead of --connect.
  auto r = run_process({"/usr/bin/env", "CASTELLAN_CONNECT=" + target, castellan_cli(), "audit",
                        "tail", "--since", "1h", "--kind", "exec_start", "--json"},
                       {}, 60);
  BOOST_TEST(r.exit_code == 0, r.err);
  std::vector<uint64_t> ids;
  std::size_t start = 0;
  for (auto nl = r.out.find('\n'); nl != std::string::npos;
       start = nl + 1, nl = r.out.find('\n', start)) {
    auto j = json::parse(r.out.substr(start, nl - start));
    BOOST_TEST(j["kind"] == "exec_start");
    ids.push_back(j["exec_id"].get<uint64_t>());
  }
  BOOST_TEST((ids == std::vector<uint64_t>{a, b}), r.out);
  // The filter goes to the server: --exec.
  auto one = run_process({castellan_cli(), "audit", "tail", "--connect", target, "--since", "1h",
                          "--exec", std::to_string(b)},
                         {}, 60);
  BOOST_TEST(one.exit_code == 0, one.err);
  BOOST_TEST(contains(one.out, "exec=" + std::to_string(b) + " "), one.out);
  BOOST_TEST(!contains(one.out, "exec=" + std::to_string(a) + " "), one.out);
  // Mistakes: exit 2, named.
  auto bad = run_process(
      {castellan_cli(), "audit", "tail", "--connect", target, "-f", "--kind", "exec_stop"}, {}, 60);
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err, "unknown kind 'exec_stop'"), bad.err);
  auto neither = run_process({castellan_cli(), "audit", "tail", "--connect", target}, {}, 60);
  BOOST_TEST(neither.exit_code == 2);
  BOOST_TEST(contains(neither.err, "--follow"), neither.err);
  auto both = run_process(
      {castellan_cli(), "audit", "tail", "--connect", target, "-f", config.dir + "/x.jsonl"}, {},
      60);
  BOOST_TEST(both.exit_code == 2);
  BOOST_TEST(contains(both.err, "not both"), both.err);
}

BOOST_AUTO_TEST_CASE(exec_end_latency_to_an_sse_client) {
  // An SSE client reads exec_end records while execs run one after the
  // other; for each, the time from the exec's end (the record's ts, taken
  // by the pool when the result is in) to the event's arrival.
  http_client sse(serve.socket_path);
  sse.send("GET", "/v1/audit?kind=exec_end", {}, "", {{"Accept", "text/event-stream"}});
  std::mutex m;
  std::map<uint64_t, int64_t> latency_ns; // by exec id
  std::atomic<bool> stop{false};
  std::string seen;
  bool live = false;
  std::thread reader([&] {
    char buf[8192];
    std::size_t start = 0;
    while (!stop) {
      boost::system::error_code ec;
      const std::size_t n = sse.socket().read_some(boost::asio::buffer(buf), ec);
      const int64_t now = realtime_ns();
      if (ec || n == 0)
        break;
      std::lock_guard<std::mutex> guard(m);
      seen.append(buf, n);
      const std::string tag = "event: audit\ndata: ";
      for (auto pos = seen.find("\n\n", start); pos != std::string::npos;
           pos = seen.find("\n\n", start)) {
        const std::string ev = seen.substr(start, pos - start);
        start = pos + 2;
        if (ev.rfind("event: live", 0) == 0)
          live = true;
        if (ev.rfind(tag, 0) != 0)
          continue;
        auto j = json::parse(ev.substr(tag.size()));
        latency_ns[j["exec_id"].get<uint64_t>()] = now - parse_ts(j["ts"].get<std::string>());
      }
    }
  });
  for (int i = 0; i < 3000; ++i) {
    {
      std::lock_guard<std::mutex> guard(m);
      if (live)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  constexpr int n = 20;
  std::vector<uint64_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(exec("print(" + std::to_string(i) + ")"));
  for (int i = 0; i < 3000; ++i) {
    {
      std::lock_guard<std::mutex> guard(m);
      if (latency_ns.count(ids.back()) != 0)
        break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::vector<double> us;
  {
    std::lock_guard<std::mutex> guard(m);
    for (auto id : ids)
      if (latency_ns.count(id) != 0)
        us.push_back(static_cast<double>(latency_ns[id]) / 1e3);
  }
  stop = true;
  ::shutdown(sse.socket().native_handle(), SHUT_RDWR);
  reader.join();
  BOOST_TEST_REQUIRE(us.size() == static_cast<std::size_t>(n), "every exec_end arrived");
  std::sort(us.begin(), us.end());
  BOOST_TEST_MESSAGE("exec_end from the exec's end to an SSE client over "
                     << n << " execs: p50 " << us[n / 2] << " us, p90 " << us[n * 9 / 10]
                     << " us, max " << us.back() << " us");
  std::printf("exec_end from the exec's end to an SSE client over %d execs: p50 %.0f us, p90 %.0f "
              "us, min %.0f us, max %.0f us\n",
              n, us[n / 2], us[n * 9 / 10], us.front(), us.back());
}

BOOST_AUTO_TEST_SUITE_END()
