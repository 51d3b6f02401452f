// `castellan serve` killed with SIGKILL in the middle of an exec, then
// started again on the same config: what the dead daemon left (its workers,
// its cgroup subtree, its socket file, its state directory) is reclaimed or
// reused, and the new daemon serves on the same socket.

#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <future>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "platform/linux/cgroup_subtree.hpp"
#include "platform/linux/cgroups.hpp"
#include "support/http_client.hpp"
#include "support/process_scan.hpp"
#include "support/serve_process.hpp"
#include "support/skip.hpp"

using namespace castellan;
using castellan::test::http_client;
using castellan::test::serve_process;

namespace {

bool is_dir(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// Live processes (not zombies) by pid, with their parent.
std::map<pid_t, pid_t> live_processes() {
  std::map<pid_t, pid_t> out;
  DIR* d = ::opendir("/proc");
  BOOST_REQUIRE(d != nullptr);
  while (auto* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0)
      continue;
    std::ifstream f("/proc/" + std::string(e->d_name) + "/stat");
    std::string text;
    if (!std::getline(f, text))
      continue; // gone
    // After the comm, which may hold anything: " STATE PPID ...".
    const auto close = text.rfind(')');
    if (close == std::string::npos)
      continue;
    std::istringstream rest(text.substr(close + 1));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    if (state != 'Z' && state != 'X')
      out[pid] = ppid;
  }
  ::closedir(d);
  return out;
}

/// Every live descendant of `root`.
std::set<pid_t> descendants(pid_t root) {
  const auto all = live_processes();
  std::set<pid_t> out;
  bool grew = true;
  while (grew) {
    grew = false;
    for (const auto& [pid, ppid] : all)
      if ((ppid == root || out.count(ppid)) && out.insert(pid).second)
        grew = true;
  }
  return out;
}

/// Processes by pid and start time: a pid reused later is another process.
using process_set = std::map<pid_t, uint64_t>;

process_set with_start_times(const std::set<pid_t>& pids) {
  process_set out;
  for (pid_t p : pids)
    if (auto t = platform::process_start_time(p); t && *t)
      out[p] = **t;
  return out;
}

/// Those of `procs` still alive (same pid, same start time, not a zombie).
std::vector<pid_t> still_alive(const process_set& procs) {
  const auto all = live_processes();
  std::vector<pid_t> out;
  for (const auto& [pid, start] : procs) {
    if (!all.count(pid))
      continue;
    auto t = platform::process_start_time(pid);
    if (t && *t && **t == start)
      out.push_back(pid);
  }
  return out;
}

void exec_ok(const std::string& socket, const std::string& pool) {
  http_client c(socket);
  auto r = c.post("/v1/exec", {{"code", "print(6*7)"}, {"pool", pool}});
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "ok", r.body);
  BOOST_TEST(r.json()["stdout"] == "42\n");
}

/// An exec that hits its deadline: a `timeout` record in the audit log.
void exec_timeout(const std::string& socket) {
  http_client c(socket);
  auto r = c.post("/v1/exec", {{"code", "while True: pass"}, {"pool", "shared"}, {"timeout_ms", 200}});
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  BOOST_TEST(r.json()["error_class"] == "timeout", r.body);
}

/// The audit log's `timeout` records, once there are `n` (30 s safety net:
/// the log is written by its own thread).
std::size_t wait_for_timeout_records(const std::string& file, std::size_t n) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    std::size_t found = 0;
    std::ifstream f(file);
    std::string line;
    while (std::getline(f, line)) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      BOOST_REQUIRE_MESSAGE(!j.is_discarded(), "not a JSON line in " << file << ": " << line);
      found += j.value("kind", "") == "timeout";
    }
    if (found >= n || std::chrono::steady_clock::now() >= deadline)
      return found;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_serve_restart)

BOOST_AUTO_TEST_CASE(a_restart_after_sigkill_reclaims_workers_cgroups_and_socket) {
  auto layout = platform::cgroup_layout::detect();
  if (!layout || !layout->find("memory") || !layout->find("pids") || !layout->find("cpu")) {
    castellan::test::skip("no memory, pids and cpu controllers for this process");
    return;
  }
  auto self = platform::supervisor_id::self();
  BOOST_REQUIRE(self);
  std::vector<std::string> owns;
  for (const auto& c : layout->controllers())
    if (std::find(owns.begin(), owns.end(), c.own_dir) == owns.end())
      owns.push_back(c.own_dir);

  char tmpl[] = "/tmp/castellan-restart-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::string config = dir + "/castellan.toml";
  const std::string state = dir + "/state";
  const std::string socket = dir + "/castellan.sock";
  std::ofstream{config} << "state_dir = \"" << state << "\"\n\n"
                        << "[[pools]]\nname = \"iso\"\nsize = 2\nmode = \"isolated\"\n\n"
                        << "[[pools]]\nname = \"shared\"\nsize = 2\nmode = \"shared\"\n";

  serve_process first({"--config", config}, socket);
  BOOST_REQUIRE_EQUAL(first.first_line(), "castellan: listening on unix:" + socket + "\n");
  exec_ok(socket, "iso");
  exec_ok(socket, "shared");
  exec_timeout(socket);
  const std::string audit = state + "/audit.jsonl";
  BOOST_REQUIRE_EQUAL(wait_for_timeout_records(audit, 1), 1u);

  // An exec mid-run when the daemon dies.
  const std::string tag = castellan::test::unique_task_name("ckrst");
  auto in_flight = std::async(std::launch::async, [&] {
    http_client c(socket);
    return c.post("/v1/exec", {{"code", castellan::test::python_set_task_name(tag) +
                                            "import time\ntime.sleep(60)\n"},
                               {"pool", "iso"}});
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  std::vector<pid_t> running;
  while ((running = castellan::test::tasks_named(tag)).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  const auto workers = with_start_times(descendants(first.pid));
  BOOST_TEST_MESSAGE("the first daemon's descendants: " << workers.size());
  for (pid_t t : running)
    BOOST_TEST(workers.count(t) == 1u, "exec task " << t << " not below the daemon");
  BOOST_REQUIRE(!workers.empty());
  auto start = platform::process_start_time(first.pid);
  BOOST_REQUIRE(start);
  BOOST_REQUIRE(*start);
  const std::string subtree =
      platform::supervisor_id{first.pid, **start, self->pid_ns}.name();
  for (const auto& own : owns)
    BOOST_REQUIRE_MESSAGE(is_dir(own + "/castellan/" + subtree), own << ": no subtree " << subtree);

  BOOST_REQUIRE_EQUAL(::kill(first.pid, SIGKILL), 0);
  BOOST_TEST(first.wait() == 128 + SIGKILL);
  auto cut = in_flight.get();
  BOOST_TEST(cut.status == 0u, "an answer from a killed daemon: " << cut.body);

  // What it left: the socket file (nobody listening), its state directory
  // and the audit log in it, its cgroup subtree.
  struct stat st {};
  BOOST_REQUIRE(::lstat(socket.c_str(), &st) == 0);
  BOOST_TEST(S_ISSOCK(st.st_mode));
  BOOST_TEST(is_dir(state));
  BOOST_TEST(wait_for_timeout_records(audit, 1) == 1u);
  for (const auto& own : owns)
    BOOST_TEST(is_dir(own + "/castellan/" + subtree), own << ": left behind by SIGKILL");
  BOOST_TEST_MESSAGE("its descendants alive right after SIGKILL: " << still_alive(workers).size()
                                                                   << " of " << workers.size());

  // Started again on the same config: same socket, and the dead one's
  // leftovers are gone.
  serve_process second({"--config", config}, socket);
  BOOST_REQUIRE_EQUAL(second.first_line(), "castellan: listening on unix:" + socket + "\n");
  exec_ok(socket, "iso");
  exec_ok(socket, "shared");
  for (const auto& own : owns)
    BOOST_TEST(!is_dir(own + "/castellan/" + subtree), own << ": not reclaimed");
  BOOST_TEST(castellan::test::wait_until_no_task_named(tag).empty());
  const auto left = still_alive(workers);
  BOOST_TEST(left.empty(), left.size() << " processes of the killed daemon still alive");
  // The state directory is still the daemon's own, and its audit log goes
  // on where the dead daemon's ended.
  BOOST_REQUIRE(::stat(state.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 0777) == 0700u);
  exec_timeout(socket);
  BOOST_TEST(wait_for_timeout_records(audit, 2) == 2u);

  BOOST_REQUIRE_EQUAL(::kill(second.pid, SIGTERM), 0);
  BOOST_TEST(second.wait() == 0);
  BOOST_TEST(::lstat(socket.c_str(), &st) != 0);
  std::system(("rm -rf '" + dir + "'").c_str());
}

BOOST_AUTO_TEST_SUITE_END()
