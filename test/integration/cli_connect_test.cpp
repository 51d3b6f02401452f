// The CLI as a client of a running `castellan serve` (--connect,
// CASTELLAN_CONNECT): the same output and exit codes as when it runs the
// exec itself, the request's stdin, environment and directory, the daemon's
// errors named, Ctrl-C cancelling the exec on the daemon.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"
#include "support/process_scan.hpp"
#include "support/run_process.hpp"
#include "support/serve_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::process_result;
using castellan::test::run_process;
using castellan::test::serve_process;

namespace {

/// A daemon for each case (its default pool: two workers in isolated
/// mode), and the CLI pointed at it.
struct daemon_fixture {
  serve_process serve;
  std::string target = "unix:" + serve.socket_path;

  daemon_fixture() {
    BOOST_REQUIRE(serve.first_line() == "castellan: listening on " + target + "\n");
  }

  process_result cli(std::vector<std::string> args, const std::string& input = {},
                     const std::function<void(pid_t)>& while_running = {}) {
    args.insert(args.begin(), castellan_cli());
    args.insert(args.begin() + 2, {"--connect", target});
    return run_process(args, input, 60, while_running);
  }

  /// The same command run by the CLI itself, without a daemon.
  static process_result embedded(std::vector<std::string> args, const std::string& input = {}) {
    args.insert(args.begin(), castellan_cli());
    return run_process(args, input);
  }
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// `err` without the embedded supervisor's log lines ("[2026-… ] [castellan]
/// …"): it may log reclaiming a cgroup another test's supervisor left, which
/// is no part of the output the two modes share.
std::string without_log_lines(const std::string& err) {
  std::string out;
  std::size_t at = 0;
  while (at < err.size()) {
    std::size_t end = err.find('\n', at);
    end = end == std::string::npos ? err.size() : end + 1;
    if (err.compare(at, 2, "[2") != 0)
      out.append(err, at, end - at);
    at = end;
  }
  return out;
}

/// The CLI run in the background with its stdout and stderr on pipes, read
/// by the test while it runs.
struct running_cli {
  pid_t pid = -1;
  int out_fd = -1;
  int err_fd = -1;
  std::string out;
  std::string err;

  explicit running_cli(const std::vector<std::string>& args) {
    int o[2];
    int e[2];
    BOOST_REQUIRE(::pipe2(o, O_CLOEXEC) == 0 && ::pipe2(e, O_CLOEXEC) == 0);
    std::vector<std::string> argv = args;
    argv.insert(argv.begin(), castellan_cli());
    std::vector<char*> c_argv;
    for (auto& a : argv)
      c_argv.push_back(a.data());
    c_argv.push_back(nullptr);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(o[1], 1);
      ::dup2(e[1], 2);
      ::execv(c_argv[0], c_argv.data());
      ::_exit(127);
    }
    ::close(o[1]);
    ::close(e[1]);
    out_fd = o[0];
    err_fd = e[0];
  }

  ~running_cli() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    for (int fd : {out_fd, err_fd})
      if (fd >= 0)
        ::close(fd);
  }

  /// Reads what comes on either pipe into out and err; false at the end of
  /// both (or an error).
  bool read_some() {
    pollfd fds[2] = {{out_fd, POLLIN, 0}, {err_fd, POLLIN, 0}};
    if (out_fd < 0 && err_fd < 0)
      return false;
    if (::poll(fds, 2, -1) < 0)
      return errno == EINTR;
    for (int i = 0; i < 2; ++i) {
      int& fd = i == 0 ? out_fd : err_fd;
      if (fd < 0 || fds[i].revents == 0)
        continue;
      char buf[4096];
      const ssize_t n = ::read(fd, buf, sizeof buf);
      if (n > 0) {
        (i == 0 ? out : err).append(buf, static_cast<std::size_t>(n));
      } else {
        ::close(fd);
        fd = -1;
      }
    }
    return true;
  }

  /// Reads until stdout is `want_out` and stderr `want_err` so far; false
  /// when the CLI ended first or printed something else.
  bool read_until(const std::string& want_out, const std::string& want_err) {
    while (out.size() < want_out.size() || err.size() < want_err.size()) {
      if (!read_some())
        break;
    }
    BOOST_TEST(out == want_out);
    BOOST_TEST(err == want_err);
    return out == want_out && err == want_err;
  }

  /// Reads the rest and waits for the CLI: its exit code (-1: not an exit).
  int finish() {
    while (read_some()) {
    }
    int status = 0;
    const pid_t waited = ::waitpid(pid, &status, 0);
    pid = -1;
    if (waited < 0 || !WIFEXITED(status))
      return -1;
    return WEXITSTATUS(status);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(cli_connect, daemon_fixture)

BOOST_AUTO_TEST_CASE(output_and_exit_codes_are_those_of_the_embedded_cli) {
  const std::vector<std::vector<std::string>> cases = {
    {"exec", "print('hello')"},
    {"exec", "import sys; sys.stdout.buffer.write(b'\\xff\\xfe raw'); sys.exit(3)"},
    // A character cut between two pieces of output, and bytes that are not
    // UTF-8 on both streams (base64 pieces).
    {"exec", "import sys\nfor f, b in ((sys.stdout, b'caf\\xc3'), (sys.stdout, b'\\xa9 \\xff\\n'),"
             " (sys.stderr, b'\\xfe\\xc3'), (sys.stderr, b'\\xa9 e\\n')):\n"
             "    f.buffer.write(b); f.flush()\n"},
    // Many pieces, and more than the output limit.
    {"exec", "for i in range(20000): print(i)"},
    {"exec", "import sys; sys.stdout.write('y' * 3000000); sys.stderr.write('z' * 10)"},
    {"exec", "raise ValueError('nope')"},
    {"exec", "import sys; print('to stderr', file=sys.stderr); sys.exit(7)"},
    {"exec", "--timeout", "1s", "while True: pass"},
    {"run", "--", "/usr/bin/python3", "-c",
     "import sys; print('out'); print('err', file=sys.stderr); sys.exit(4)"},
    {"run", "--", "/no/such/program"},
  };
  for (const auto& args : cases) {
    BOOST_TEST_CONTEXT(args[1] + " … " + args.back()) {
      auto remote = cli(args);
      auto local = embedded(args);
      BOOST_TEST(remote.exit_code == local.exit_code, remote.err);
      BOOST_TEST(remote.out == local.out);
      if (args[1] != "--timeout") // the timeout's line names the time left
        BOOST_TEST(remote.err == without_log_lines(local.err));
      else
        BOOST_TEST(contains(remote.err, "castellan: timeout"), remote.err);
    }
  }
  // --json: the same object, exec and worker ids and times aside.
  auto remote = cli({"exec", "--json", "print(6*7)"});
  auto local = embedded({"exec", "--json", "print(6*7)"});
  auto a = nlohmann::json::parse(remote.out);
  auto b = nlohmann::json::parse(local.out);
  for (auto* j : {&a, &b})
    for (const char* k : {"exec_id", "worker_id", "timing", "usage", "enforcement"})
      j->erase(k);
  BOOST_TEST(a == b, a.dump() << " vs " << b.dump());
}

BOOST_AUTO_TEST_CASE(stdin_env_and_workdir_travel_with_the_request) {
  auto code = cli({"exec", "--stdin", "-e", "GREETING=hi there", "-w", "/usr",
                   "import os, sys; data = sys.stdin.buffer.read(); "
                   "print(len(data), data[:3], os.environ['GREETING'], os.getcwd())"},
                  std::string("\xff\x00\x01rest", 7));
  BOOST_TEST(code.exit_code == 0, code.err);
  BOOST_TEST(code.out == "7 b'\\xff\\x00\\x01' hi there /usr\n");
  auto cmd = cli({"run", "--stdin", "-e", "X=y", "--", "/usr/bin/python3", "-c",
                  "import os, sys; print(sys.stdin.read().strip(), os.environ['X'])"},
                 "line\n");
  BOOST_TEST(cmd.out == "line y\n", cmd.err);
}

BOOST_AUTO_TEST_CASE(files_travel_both_ways_as_with_the_embedded_cli) {
  char dir_template[] = "/tmp/castellan-cli-files-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(dir_template) != nullptr);
  const std::string dir = dir_template;
  {
    std::ofstream in(dir + "/in.bin", std::ios::binary);
    in << std::string("\xff\x00" "abc", 5);
  }
  auto args = [&](const std::string& suffix) {
    return std::vector<std::string>{
      "exec", "--file-in", dir + "/in.bin:data/in.bin", "--file-out",
      "out.bin:" + dir + "/out." + suffix, "--file-out", "/tmp/none:" + dir + "/none." + suffix,
      "import os; d = open('data/in.bin', 'rb').read(); print(os.getcwd(), len(d)); "
      "open('out.bin', 'wb').write(d[::-1])"};
  };
  auto remote = cli(args("remote"));
  auto local = embedded(args("local"));
  BOOST_TEST(remote.exit_code == 0, remote.err);
  BOOST_TEST(remote.exit_code == local.exit_code);
  BOOST_TEST(remote.out == "/tmp 5\n", remote.err);
  BOOST_TEST(remote.out == local.out);
  BOOST_TEST(remote.err == "castellan: --file-out /tmp/none: missing: no such file\n");
  BOOST_TEST(remote.err == without_log_lines(local.err));
  for (const char* suffix : {"remote", "local"}) {
    std::ifstream out(dir + "/out." + suffix, std::ios::binary);
    std::string got((std::istreambuf_iterator<char>(out)), std::istreambuf_iterator<char>());
    BOOST_TEST(got == std::string("cba\x00\xff", 5), suffix);
  }
  // A command, with --json: the files are in the result too.
  auto cmd = cli({"run", "--json", "-w", "/tmp/w", "--file-in", dir + "/in.bin:/tmp/w/x",
                  "--file-out", "x:" + dir + "/x", "--", "/usr/bin/python3", "-c",
                  "import os; print(os.listdir('.'))"});
  BOOST_TEST(cmd.exit_code == 0, cmd.err);
  auto j = nlohmann::json::parse(cmd.out, nullptr, false);
  BOOST_TEST(j["stdout"] == "['x']\n", cmd.out);
  BOOST_TEST(j["files"][0]["content_base64"] == "/wBhYmM=", cmd.out);
  auto bad = cli({"exec", "--file-out", "/etc/passwd", "print(1)"});
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(contains(bad.err, "files_out[0]: '/etc/passwd' is not below /tmp"), bad.err);
  if (std::system(("rm -rf " + dir).c_str()) != 0)
    BOOST_TEST_MESSAGE("cannot remove " << dir);
}

BOOST_AUTO_TEST_CASE(output_is_printed_as_it_comes_before_the_exec_ends) {
  // The code prints a line, then waits for a signal that the test sends
  // only once the CLI has printed that line: the line cannot have come
  // with the result.
  const std::string tag = castellan::test::unique_task_name("ckstream");
  running_cli run(
    {"exec", "--connect", target,
     castellan::test::python_set_task_name(tag) +
       "import signal, sys\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
       "print('first')\nsys.stderr.buffer.write(b'\\xfe\\n')\nsys.stderr.flush()\n"
       "signal.sigwait({signal.SIGUSR1})\n"
       "print('second', file=sys.stderr)\nprint('third')\nsys.exit(3)\n"});
  BOOST_REQUIRE(run.read_until("first\n", "\xfe\n"));
  // The daemon still has the exec in flight.
  castellan::test::http_client h(serve.socket_path);
  BOOST_TEST(h.get("/v1/status").json()["in_flight"] == 1);
  const auto tasks = castellan::test::tasks_named(tag);
  BOOST_REQUIRE(!tasks.empty());
  for (pid_t t : tasks)
    BOOST_REQUIRE(::kill(t, SIGUSR1) == 0);
  BOOST_TEST(run.finish() == 3);
  BOOST_TEST(run.out == "first\nthird\n");
  BOOST_TEST(run.err == "\xfe\nsecond\n");
}

BOOST_AUTO_TEST_CASE(ctrl_c_during_a_streamed_exec_cancels_it_and_prints_its_output_once) {
  const std::string tag = castellan::test::unique_task_name("ckstrint");
  running_cli run({"exec", "--connect", target,
                   castellan::test::python_set_task_name(tag) +
                     "import sys, time\nprint('working')\nprint('warn', file=sys.stderr)\n"
                     "time.sleep(600)\n"});
  BOOST_REQUIRE(run.read_until("working\n", "warn\n"));
  BOOST_REQUIRE(::kill(run.pid, SIGINT) == 0);
  BOOST_TEST(run.finish() == 125, run.err);
  // What was streamed is not printed again with the result.
  BOOST_TEST(run.out == "working\n");
  BOOST_TEST(run.err.rfind("warn\ncastellan: interrupted: cancelling exec cli-", 0) == 0, run.err);
  BOOST_TEST(contains(run.err, "\ncastellan: cancelled: cancelled by request after "), run.err);
  BOOST_TEST(castellan::test::wait_until_no_task_named(tag).empty());
}

BOOST_AUTO_TEST_CASE(status_and_metrics_come_from_the_daemon) {
  cli({"exec", "print(1)"});
  auto status = cli({"status"});
  BOOST_TEST(status.exit_code == 0, status.err);
  BOOST_TEST(contains(status.out, "pool default: 2 workers"), status.out);
  BOOST_TEST(!contains(status.out, " 0 execs"), status.out); // the daemon's count, live
  auto metrics = cli({"status", "--metrics"});
  BOOST_TEST(metrics.exit_code == 0, metrics.err);
  BOOST_TEST(contains(metrics.out, "castellan_execs_total"), metrics.out.substr(0, 400));
}

BOOST_AUTO_TEST_CASE(the_environment_variable_points_the_cli_at_the_daemon) {
  ::setenv("CASTELLAN_CONNECT", target.c_str(), 1);
  auto r = run_process({castellan_cli(), "exec", "print('via env')"});
  ::unsetenv("CASTELLAN_CONNECT");
  BOOST_TEST(r.out == "via env\n", r.err);
  auto status = run_process({castellan_cli(), "status", "--connect", target});
  BOOST_TEST(contains(status.out, "pool default"), status.err);
}

BOOST_AUTO_TEST_CASE(errors_are_named_and_exit_2) {
  auto pool = cli({"exec", "--pool", "nope", "print(1)"});
  BOOST_TEST(pool.exit_code == 2);
  BOOST_TEST(contains(pool.err, "no pool named 'nope'"), pool.err);
  // The refusal of a request for a stream comes whole, as any answer.
  auto audit = run_process(
    {castellan_cli(), "audit", "tail", "--connect", target, "--since", "1h"});
  BOOST_TEST(audit.exit_code == 2);
  BOOST_TEST(contains(audit.err, "the daemon refused: since reads the audit file back"),
             audit.err);
  auto flag = cli({"exec", "--policy", "strict", "print(1)"});
  BOOST_TEST(flag.exit_code == 2);
  BOOST_TEST(contains(flag.err, "--policy shapes a pool started for this call"), flag.err);
  auto nowhere = run_process({castellan_cli(), "exec", "--connect",
                              "unix:" + serve.dir + "/missing.sock", "print(1)"});
  BOOST_TEST(nowhere.exit_code == 2);
  BOOST_TEST(contains(nowhere.err, "cannot connect to the daemon at unix:"), nowhere.err);
  auto scheme = run_process({castellan_cli(), "exec", "--connect", "ftp://x", "print(1)"});
  BOOST_TEST(scheme.exit_code == 2);
  BOOST_TEST(contains(scheme.err, "unknown scheme"), scheme.err);
  auto embedded_pool = run_process({castellan_cli(), "exec", "--pool", "x", "print(1)"});
  BOOST_TEST(embedded_pool.exit_code == 2);
  BOOST_TEST(contains(embedded_pool.err, "give --connect too"), embedded_pool.err);
}

BOOST_AUTO_TEST_CASE(ctrl_c_cancels_the_exec_on_the_daemon_and_keeps_its_output) {
  const std::string tag = castellan::test::unique_task_name("ckconn");
  const std::string code = castellan::test::python_set_task_name(tag) +
                           "import time\nprint('working', flush=True)\ntime.sleep(120)\n";
  auto r = cli({"exec", "--json", code}, {}, [&](pid_t pid) {
    const bool running = castellan::test::wait_until_task_in_syscall(tag, SYS_clock_nanosleep) &&
                         castellan::test::wait_until_harness_drained(tag);
    BOOST_CHECK_MESSAGE(running, "the exec was not seen asleep after its print within 30 s");
    BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);
  });
  BOOST_TEST(r.exit_code == 125, r.err);
  BOOST_TEST(contains(r.err, "cancelling exec cli-"), r.err);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object(), r.out);
  BOOST_TEST(j["error_class"] == "cancelled");
  BOOST_TEST(j["stdout"] == "working\n");
  BOOST_TEST(castellan::test::wait_until_no_task_named(tag).empty());
}

BOOST_AUTO_TEST_SUITE_END()
