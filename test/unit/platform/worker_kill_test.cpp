// kill_worker_tree against the real kernel: a process tree that ignores
// SIGTERM, leaves its process group (setsid) and blocks in read() dies
// through each mechanism on its own — the cgroup (freezer + kill on v1,
// cgroup.kill on v2) and the pid namespace's init — and through both as the
// pool uses them (the init first, then the cgroup without freezing).

#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "platform/linux/cgroups.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/linux/worker_kill.hpp"
#include "platform/spawn_worker.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::platform;
using namespace std::chrono_literals;

namespace {

/// A tree of four processes that ignore SIGTERM/SIGINT, one of which left
/// the process group and session, all blocked or sleeping; the leader blocks
/// in read() on its stdin.
const char* const stubborn_tree =
  "trap '' TERM INT HUP\n"
  "sleep 300 &\n"
  "setsid sh -c \"trap '' TERM; sleep 300 & wait\" &\n"
  "read x\n";

/// Every descendant of `pid` (host pids), through /proc/<pid>/task/*/children.
std::set<pid_t> descendants(pid_t pid) {
  std::set<pid_t> out;
  std::vector<pid_t> todo{pid};
  while (!todo.empty()) {
    const pid_t p = todo.back();
    todo.pop_back();
    const std::string tasks = "/proc/" + std::to_string(p) + "/task";
    DIR* d = ::opendir(tasks.c_str());
    if (d == nullptr)
      continue;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.')
        continue;
      std::ifstream in(tasks + "/" + e->d_name + "/children");
      pid_t c;
      while (in >> c)
        if (out.insert(c).second)
          todo.push_back(c);
    }
    ::closedir(d);
  }
  return out;
}

bool alive(pid_t pid) {
  // A zombie is dead for our purpose (it runs nothing); its parent reaps it.
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line))
    return false;
  const auto close = line.rfind(')');
  return close != std::string::npos && close + 2 < line.size() && line[close + 2] != 'Z';
}

/// Polls `pred` until it holds or `limit` passes. Used where no event tells
/// the test (a cgroup v1 gaining or losing members, a process that someone
/// else reaps); the limit is a safety net for a loaded machine, not a timing
/// assertion.
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 30s) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > end)
      return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

bool have_cgroups(const outcome<cgroup_layout>& layout) {
  if (!layout) {
    castellan::test::skip(std::string("no cgroup layout: ") + layout.error().describe());
    return false;
  }
  if (!layout->find("pids") && !layout->find("memory")) {
    castellan::test::skip("neither pids nor memory controller");
    return false;
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_kill_tests)

BOOST_AUTO_TEST_CASE(the_cgroup_alone_kills_a_stubborn_tree) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout))
    return;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-kill"),
                                  cgroup_limits{0, 64, 0});
  BOOST_REQUIRE_MESSAGE(cg, (cg ? "" : cg.error().describe()));
  int gate[2], input[2];
  BOOST_REQUIRE_EQUAL(::pipe2(gate, O_CLOEXEC), 0);
  BOOST_REQUIRE_EQUAL(::pipe(input), 0);
  const pid_t leader = ::fork();
  BOOST_REQUIRE(leader >= 0);
  if (leader == 0) {
    ::close(gate[1]);
    char c;
    if (::read(gate[0], &c, 1) != 1)
      ::_exit(3);
    ::dup2(input[0], 0);
    ::setpgid(0, 0);
    ::execl("/bin/sh", "sh", "-c", stubborn_tree, static_cast<char*>(nullptr));
    ::_exit(127);
  }
  ::close(gate[0]);
  ::close(input[0]);
  BOOST_REQUIRE(cg->attach(leader));
  BOOST_REQUIRE_EQUAL(::write(gate[1], "g", 1), 1);
  ::close(gate[1]);
  BOOST_REQUIRE(eventually([&] {
    auto p = cg->pids();
    return p && p->size() >= 4;
  }));
  const auto tree = descendants(leader);
  BOOST_TEST(tree.size() >= 3u);

  // No pidfd, no process group: only the cgroup reaches them.
  worker_kill_target target;
  target.cgroup = &*cg;
  const auto report = kill_worker_tree(target);
  BOOST_TEST_MESSAGE("killed by " << report.describe());
  BOOST_TEST(report.cgroup_error.empty(), report.cgroup_error);
  BOOST_TEST(std::string(report.cgroup_method) != "none");

  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(leader, &status, 0), leader);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST(WTERMSIG(status) == SIGKILL);
  for (pid_t p : tree)
    BOOST_TEST(eventually([&] { return !alive(p); }), "pid " << p << " survived");
  BOOST_TEST(eventually([&] {
    auto p = cg->pids();
    return p && p->empty();
  }));
  ::close(input[1]);
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_CASE(the_pid_namespace_init_alone_takes_its_namespace_down) {
  worker_spec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", stubborn_tree};
  spec.isolation = isolation_mode::namespaces;
  spec.namespaces = {true, true, true, true, true, true, true};
  int input[2];
  BOOST_REQUIRE_EQUAL(::pipe2(input, O_CLOEXEC), 0);
  spec.fds = {{input[0], 0}};
  auto child = spawn_worker(spec);
  if (!child) {
    castellan::test::skip(std::string("cannot start a sandboxed child: ") + child.error().describe());
    ::close(input[0]);
    ::close(input[1]);
    return;
  }
  ::close(input[0]);
  std::set<pid_t> tree;
  BOOST_REQUIRE(eventually([&] {
    tree = descendants(child->pid);
    return tree.size() >= 3;
  }));
  // No cgroup, no process group: the setsid'd grandchildren are reachable
  // only through the namespace.
  worker_kill_target target;
  target.init_pidfd = child->pidfd.get();
  const auto report = kill_worker_tree(target);
  BOOST_TEST(report.init_signalled);
  auto st = pidfd_reap(child->pidfd.get());
  BOOST_REQUIRE(st);
  BOOST_TEST(st->signaled);
  BOOST_TEST(st->signal == SIGKILL);
  for (pid_t p : tree)
    BOOST_TEST(!alive(p), "pid " << p << " outlived its namespace's init");
  ::close(input[1]);
}

BOOST_AUTO_TEST_CASE(a_namespace_init_goes_first_and_the_cgroup_pass_needs_no_freezer) {
  // A sandboxed worker as the pool has it: its own pid namespace and a
  // cgroup. The init is signalled first; the cgroup pass then only sends
  // SIGKILL (no freeze and thaw: nothing can fork behind a dying init).
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout))
    return;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-kill"),
                                  cgroup_limits{0, 64, 0});
  BOOST_REQUIRE_MESSAGE(cg, (cg ? "" : cg.error().describe()));
  worker_spec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", stubborn_tree};
  spec.isolation = isolation_mode::namespaces;
  spec.namespaces = {true, true, true, true, true, true, true};
  spec.cgroup = cg->placement();
  int input[2];
  BOOST_REQUIRE_EQUAL(::pipe2(input, O_CLOEXEC), 0);
  spec.fds = {{input[0], 0}};
  auto child = spawn_worker(spec);
  if (!child) {
    castellan::test::skip(std::string("cannot start a sandboxed child: ") + child.error().describe());
    ::close(input[0]);
    ::close(input[1]);
    BOOST_REQUIRE(cg->remove());
    return;
  }
  ::close(input[0]);
  std::set<pid_t> tree;
  BOOST_REQUIRE(eventually([&] {
    tree = descendants(child->pid);
    auto p = cg->pids();
    return tree.size() >= 3 && p && p->size() >= 4;
  }));
  worker_kill_target target;
  target.init_pidfd = child->pidfd.get();
  target.init_owns_pid_namespace = true;
  target.cgroup = &*cg;
  const auto report = kill_worker_tree(target);
  BOOST_TEST_MESSAGE("killed by " << report.describe());
  BOOST_TEST(report.init_signalled);
  BOOST_TEST(report.cgroup_error.empty(), report.cgroup_error);
  const std::string method = report.cgroup_method;
  BOOST_TEST((method == "kill-loop" || method == "cgroup.kill"), method);
  auto st = pidfd_reap(child->pidfd.get());
  BOOST_REQUIRE(st);
  BOOST_TEST(st->signaled);
  BOOST_TEST(st->signal == SIGKILL);
  for (pid_t p : tree)
    BOOST_TEST(eventually([&] { return !alive(p); }), "pid " << p << " survived");
  BOOST_TEST(eventually([&] {
    auto p = cg->pids();
    return p && p->empty();
  }));
  ::close(input[1]);
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_CASE(signal_all_on_an_empty_cgroup_is_harmless) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout))
    return;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-kill"),
                                  cgroup_limits{0, 64, 0});
  BOOST_REQUIRE(cg);
  auto pass = cg->signal_all();
  BOOST_REQUIRE(pass);
  BOOST_TEST(pass->tasks == 0u);
  BOOST_REQUIRE(cg->kill_all());
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_SUITE_END()
