// The hard kill through the real CLI: `castellan exec --timeout` ends the
// exec with 124 however the code spins, forks, ignores signals or blocks, and
// nothing of it survives; Ctrl-C cancels with 125. Timing is the benches'
// business (bench/kill): these tests check classes, exit codes and leftovers.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/process_scan.hpp"
#include "support/run_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;

namespace {

castellan::test::process_result cli(std::vector<std::string> args) {
  args.insert(args.begin(), castellan_cli());
  return run_process(args, {}, 120);
}

/// Runs `body` (tagged with a unique task name) under a short deadline and
/// checks the timeout result and that no task with the tag is left.
void expect_timeout_and_no_survivor(const std::string& body, const char* mode = "shared") {
  const std::string tag = castellan::test::unique_task_name("ckto");
  const std::string code = castellan::test::python_set_task_name(tag) +
                           "print('started', flush=True)\n" + body;
  // The deadline counts from the start of the command, the pool's start
  // included: on a loaded machine (the rest of the suite beside it, or the
  // sanitizers) that took more than a second and left no output to check.
  // Isolated mode's first exec also waits for the zygote's serving imports.
  const bool fork = std::string(mode) == "isolated";
  auto r = cli({"exec", "--json", "--mode", mode, "--timeout", fork ? "4s" : "3s", code});
  BOOST_TEST(r.exit_code == 124, r.out << r.err);
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object(), r.out);
  BOOST_TEST(j["error_class"] == "timeout");
  BOOST_TEST(j["exit_code"] == 124);
  BOOST_TEST(j["stdout"] == "started\n"); // the output so far
  BOOST_TEST_MESSAGE(mode << ": wall " << r.seconds << " s for a " << (fork ? 4 : 3)
                          << " s deadline");
  auto left = castellan::test::wait_until_no_task_named(tag);
  BOOST_TEST(left.empty(), left.size() << " task(s) named " << tag << " survived");
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_kill)

BOOST_AUTO_TEST_CASE(a_busy_loop_times_out) {
  expect_timeout_and_no_survivor("while True: pass\n");
}

BOOST_AUTO_TEST_CASE(spinning_threads_time_out) {
  expect_timeout_and_no_survivor("import threading\n"
                                 "def spin():\n"
                                 "    while True: pass\n"
                                 "for _ in range(3):\n"
                                 "    threading.Thread(target=spin, daemon=True).start()\n"
                                 "while True: pass\n");
}

BOOST_AUTO_TEST_CASE(forked_children_that_left_the_group_die_too) {
  expect_timeout_and_no_survivor("import os, time\n"
                                 "for _ in range(3):\n"
                                 "    if os.fork() == 0:\n"
                                 "        os.setsid()\n"
                                 "        while True: time.sleep(1)\n"
                                 "while True: pass\n");
}

BOOST_AUTO_TEST_CASE(sigterm_ignored_does_not_help) {
  expect_timeout_and_no_survivor("import signal\n"
                                 "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                 "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                 "while True: pass\n");
}

BOOST_AUTO_TEST_CASE(a_blocked_read_times_out) {
  expect_timeout_and_no_survivor("import os\nr, w = os.pipe()\nos.read(r, 1)\n");
}

BOOST_AUTO_TEST_CASE(isolated_mode_times_out_the_same_way) {
  expect_timeout_and_no_survivor("import os, time\n"
                                 "if os.fork() == 0:\n"
                                 "    os.setsid()\n"
                                 "    while True: time.sleep(1)\n"
                                 "while True: pass\n",
                                 "isolated");
}

BOOST_AUTO_TEST_CASE(ctrl_c_cancels_with_125_and_keeps_the_output) {
  // One SIGINT, sent once the exec runs and its output is in the ring (not
  // after a guessed delay): the cancel finds it running and the result keeps
  // what it printed.
  const std::string tag = castellan::test::unique_task_name("ckcc");
  const std::string code = castellan::test::python_set_task_name(tag) +
                           "import time\nprint('working', flush=True)\ntime.sleep(120)\n";
  const std::string base = "/tmp/castellan-it-cancel-" + std::to_string(::getpid());
  const std::string out_file = base + ".json";
  const std::string err_file = base + ".err";
  const std::string cli_path = castellan_cli();
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    const int out = ::open(out_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int err = ::open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    const int null = ::open("/dev/null", O_RDONLY);
    if (out < 0 || err < 0 || null < 0 || ::dup2(null, 0) < 0 || ::dup2(out, 1) < 0 ||
        ::dup2(err, 2) < 0)
      ::_exit(127);
    ::execl(cli_path.c_str(), cli_path.c_str(), "exec", "--json", "--mode", "isolated",
            "--timeout", "60s", code.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  BOOST_REQUIRE(pidfd >= 0);
  const bool running = castellan::test::wait_until_task_in_syscall(tag, SYS_clock_nanosleep) &&
                       castellan::test::wait_until_harness_drained(tag);
  BOOST_CHECK_MESSAGE(running, "the exec was not seen asleep after its print within 30 s");
  BOOST_REQUIRE_EQUAL(::kill(pid, SIGINT), 0);
  pollfd exited{pidfd, POLLIN, 0};
  const bool ended = ::poll(&exited, 1, 60'000) == 1;
  if (!ended)
    ::kill(pid, SIGKILL);
  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(pid, &status, 0), pid);
  ::close(pidfd);
  BOOST_TEST(ended, "the CLI did not end within 60 s of SIGINT");
  auto slurp = [](const std::string& path) {
    std::ifstream in(path);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::remove(path.c_str());
    return text;
  };
  const std::string text = slurp(out_file);
  const std::string err = slurp(err_file);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 125), "status " << status << ": " << err);
  BOOST_TEST(err.find("cancelling exec") != std::string::npos, err);
  auto j = nlohmann::json::parse(text, nullptr, false);
  BOOST_REQUIRE_MESSAGE(j.is_object(), text);
  BOOST_TEST(j["error_class"] == "cancelled");
  BOOST_TEST(j["exit_code"] == 125);
  BOOST_TEST(j["stdout"] == "working\n");
  auto left = castellan::test::wait_until_no_task_named(tag);
  BOOST_TEST(left.empty());
}

BOOST_AUTO_TEST_SUITE_END()
