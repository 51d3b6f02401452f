// Real supervisors (the castellan CLI) and their cgroup subtrees: one killed
// with SIGKILL leaves its subtree, the next start reclaims it and leaves a
// live supervisor's alone.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "platform/linux/cgroup_subtree.hpp"
#include "platform/linux/cgroups.hpp"
#include "support/build_paths.hpp"
#include "support/run_process.hpp"
#include "support/skip.hpp"

using namespace castellan;

namespace {

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

std::vector<std::string> own_dirs(const platform::cgroup_layout& layout) {
  std::vector<std::string> out;
  for (const auto& c : layout.controllers())
    if (std::find(out.begin(), out.end(), c.own_dir) == out.end())
      out.push_back(c.own_dir);
  return out;
}

/// `castellan exec CODE` in a child process, output to /dev/null.
pid_t start_cli(const std::string& code) {
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::dup2(null, 2);
    const std::string cli = test::castellan_cli();
    ::execl(cli.c_str(), cli.c_str(), "exec", "--timeout", "60s", code.c_str(),
            static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

/// The subtree name of process `pid` once it has a worker cgroup in it.
std::string wait_for_worker_cgroup(pid_t pid, const std::string& own) {
  auto self = platform::supervisor_id::self();
  BOOST_REQUIRE(self);
  // mkdir in cgroupfs tells no one the test could wait on without watching
  // each level as it appears: poll, with a 30 s safety net.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    auto start = platform::process_start_time(pid);
    BOOST_REQUIRE(start);
    if (*start) {
      platform::supervisor_id id{pid, **start, self->pid_ns};
      const std::string dir = own + "/castellan/" + id.name();
      if (is_dir(dir) && is_dir(dir + "/castellan-w-" + std::to_string(pid) + "-1"))
        return id.name();
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_FAIL("no worker cgroup of supervisor " << pid << " appeared within 30 s");
  return {};
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_cgroup_reclaim)

BOOST_AUTO_TEST_CASE(a_start_reclaims_a_killed_supervisors_cgroups_and_leaves_a_live_ones) {
  auto layout = platform::cgroup_layout::detect();
  if (!layout || !layout->find("memory") || !layout->find("pids") || !layout->find("cpu")) {
    castellan::test::skip("no memory, pids and cpu controllers for this process");
    return;
  }
  const auto owns = own_dirs(*layout);
  const pid_t dead = start_cli("import time; time.sleep(50)");
  const pid_t live = start_cli("import time; time.sleep(50)");
  const std::string dead_name = wait_for_worker_cgroup(dead, owns.front());
  const std::string live_name = wait_for_worker_cgroup(live, owns.front());

  BOOST_REQUIRE_EQUAL(::kill(dead, SIGKILL), 0);
  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(dead, &status, 0), dead);
  for (const auto& own : owns)
    BOOST_TEST(is_dir(own + "/castellan/" + dead_name), own << ": left behind by SIGKILL");

  // The next supervisor's first worker reclaims it.
  auto next = test::run_process({test::castellan_cli(), "exec", "print(1)"});
  BOOST_TEST(next.exit_code == 0, next.err);
  // A one-shot command's output is the code's alone: the reclaim is no part of it.
  BOOST_TEST(next.out == "1\n");
  BOOST_TEST(next.err == "");
  for (const auto& own : owns) {
    BOOST_TEST(!is_dir(own + "/castellan/" + dead_name), own);
    BOOST_TEST(is_dir(own + "/castellan/" + live_name), own);
  }
  BOOST_TEST(::kill(live, 0) == 0); // the live supervisor still runs

  // Killed too, the last one's subtree goes at the next start as well.
  BOOST_REQUIRE_EQUAL(::kill(live, SIGKILL), 0);
  BOOST_REQUIRE_EQUAL(::waitpid(live, &status, 0), live);
  auto last = test::run_process({test::castellan_cli(), "exec", "print(2)"});
  BOOST_TEST(last.exit_code == 0, last.err);
  for (const auto& own : owns)
    BOOST_TEST(!is_dir(own + "/castellan/" + live_name), own);
}

BOOST_AUTO_TEST_CASE(a_supervisor_that_ends_normally_leaves_no_cgroup) {
  auto layout = platform::cgroup_layout::detect();
  if (!layout || !layout->find("pids")) {
    castellan::test::skip("no pids controller for this process");
    return;
  }
  auto self = platform::supervisor_id::self();
  BOOST_REQUIRE(self);
  const pid_t pid = start_cli("print(1)");
  // The start time is the fork's: the same before and after the exec.
  auto start = platform::process_start_time(pid);
  BOOST_REQUIRE(start);
  BOOST_REQUIRE(*start);
  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(pid, &status, 0), pid);
  BOOST_TEST((WIFEXITED(status) && WEXITSTATUS(status) == 0), status);
  const platform::supervisor_id id{pid, **start, self->pid_ns};
  for (const auto& own : own_dirs(*layout))
    BOOST_TEST(!is_dir(own + "/castellan/" + id.name()), own << "/castellan/" << id.name());
}

BOOST_AUTO_TEST_SUITE_END()
