// One cgroup subtree per supervisor, and the reclaim of a dead one's, with
// real supervisors' stand-ins in child processes and the real kernel.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <sstream>

#include "ipc/unique_fd.hpp"
#include "platform/linux/cgroup_subtree.hpp"
#include "platform/linux/cgroups.hpp"
#include "platform/linux/file_io.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

bool have_cgroups(const outcome<cgroup_layout>& layout) {
  if (!layout) {
    castellan::test::skip(std::string("no cgroup layout: ") + layout.error().describe());
    return false;
  }
  for (const char* c : {"memory", "pids", "cpu"})
    if (!layout->find(c)) {
      castellan::test::skip(std::string("the '") + c + "' controller is on neither cgroup v1 nor v2");
      return false;
    }
  return true;
}

std::vector<std::string> own_dirs(const cgroup_layout& layout) {
  std::vector<std::string> out;
  for (const auto& c : layout.controllers())
    if (std::find(out.begin(), out.end(), c.own_dir) == out.end())
      out.push_back(c.own_dir);
  return out;
}

bool is_dir(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

/// A supervisor's stand-in in a child process: it makes its subtree and one
/// worker cgroup there (limits set, the freezer FROZEN when `frozen`, as a
/// supervisor killed in the middle of a kill pass leaves it), puts a
/// sleeping child of its own in it, reports "<subtree name> <task pid>" and
/// waits for a byte; then it returns normally, so its destructors run.
struct stand_in {
  pid_t pid = -1;
  std::string name;
  pid_t task = -1;
  unique_fd release;
};

stand_in start_stand_in(bool frozen) {
  int report[2], go[2];
  BOOST_REQUIRE_EQUAL(::pipe2(report, O_CLOEXEC), 0);
  BOOST_REQUIRE_EQUAL(::pipe2(go, O_CLOEXEC), 0);
  stand_in s;
  s.pid = ::fork();
  BOOST_REQUIRE(s.pid >= 0);
  if (s.pid == 0) {
    ::close(report[0]);
    ::close(go[1]);
    int code = 0;
    {
      auto layout = cgroup_layout::detect();
      auto self = supervisor_id::self();
      if (!layout || !self)
        ::_exit(10);
      auto subtree = cgroup_subtree::create(*layout, *self);
      if (!subtree)
        ::_exit(11);
      cgroup_limits limits;
      limits.memory_bytes = 64ull << 20;
      limits.pids = 8;
      limits.cpu_percent = 50;
      auto cg = worker_cgroup::create(subtree->layout(), worker_cgroup::unique_name("castellan-w"),
                                      limits);
      if (!cg)
        ::_exit(12);
      const pid_t task = ::fork();
      if (task == 0) {
        for (;;)
          ::pause();
      }
      if (task < 0 || !cg->attach(task))
        ::_exit(13);
      cgroup_version v;
      const std::string freezer = cg->directory_of("freezer", &v);
      if (frozen && !freezer.empty() && v == cgroup_version::v1)
        if (!write_text_file(freezer + "/freezer.state", "FROZEN"))
          ::_exit(14);
      const std::string line = subtree->name() + " " + std::to_string(task) + "\n";
      if (::write(report[1], line.data(), line.size()) != static_cast<ssize_t>(line.size()))
        ::_exit(15);
      char byte;
      if (::read(go[0], &byte, 1) != 1)
        code = 16;
      // cg, then subtree: killed, removed.
    }
    ::_exit(code); // the block's end ran the destructors: worker cgroup, then subtree
  }
  ::close(report[1]);
  ::close(go[0]);
  s.release.reset(go[1]);
  std::string text;
  char buf[256];
  pollfd p{report[0], POLLIN, 0};
  while (text.find('\n') == std::string::npos && ::poll(&p, 1, 10000) == 1) {
    const ssize_t n = ::read(report[0], buf, sizeof buf);
    if (n <= 0)
      break;
    text.append(buf, static_cast<std::size_t>(n));
  }
  ::close(report[0]);
  std::istringstream in(text);
  in >> s.name >> s.task;
  BOOST_REQUIRE_MESSAGE(!s.name.empty() && s.task > 0, "stand-in did not report: '" << text << "'");
  return s;
}

int reap(pid_t pid) {
  int status = 0;
  BOOST_REQUIRE_EQUAL(::waitpid(pid, &status, 0), pid);
  return status;
}

/// True when the process behind `pidfd` ends within `ms`.
bool ends_within(int pidfd, int ms) {
  pollfd p{pidfd, POLLIN, 0};
  return ::poll(&p, 1, ms) == 1;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cgroup_subtree_tests)

BOOST_AUTO_TEST_CASE(supervisor_ids_parse_only_what_name_writes) {
  supervisor_id id;
  id.pid = 4242;
  id.start_time = 123456;
  id.pid_ns = 4026531836;
  BOOST_TEST(id.name() == "4242-123456-4026531836");
  auto back = supervisor_id::parse(id.name());
  BOOST_REQUIRE(back);
  BOOST_TEST(back->pid == 4242);
  BOOST_TEST(back->start_time == 123456u);
  BOOST_TEST(back->pid_ns == 4026531836u);
  for (const char* bad : {"", "castellan", "1-2", "1-2-3-4", "01-2-3", "1--3", "-1-2-3", "1-2-3 ",
                          "0-2-3", "1-+2-3", "1-2-x", "99999999999-2-3", "..", "castellan-w-1-2"})
    BOOST_TEST(!supervisor_id::parse(bad), bad);
  auto self = supervisor_id::self();
  BOOST_REQUIRE(self);
  BOOST_TEST(self->pid == ::getpid());
  auto start = process_start_time(::getpid());
  BOOST_REQUIRE(start);
  BOOST_REQUIRE(*start);
  BOOST_TEST(**start == self->start_time);
}

BOOST_AUTO_TEST_CASE(a_start_reclaims_a_killed_supervisors_subtree_and_leaves_a_live_one) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout))
    return;
  auto self = supervisor_id::self();
  BOOST_REQUIRE(self);
  const auto owns = own_dirs(*layout);

  stand_in dead = start_stand_in(true);
  stand_in live = start_stand_in(false);
  for (const auto& own : owns) {
    BOOST_TEST(is_dir(own + "/castellan/" + dead.name), own);
    BOOST_TEST(is_dir(own + "/castellan/" + live.name), own);
  }
  unique_fd dead_task(static_cast<int>(::syscall(SYS_pidfd_open, dead.task, 0)));
  unique_fd live_task(static_cast<int>(::syscall(SYS_pidfd_open, live.task, 0)));
  BOOST_REQUIRE(dead_task);
  BOOST_REQUIRE(live_task);

  // Entries reclaim must leave alone: a name that is not an id, and a dead
  // pid's subtree of another pid namespace. And one it must take: our own
  // pid with another start time, i.e. a reused pid.
  supervisor_id other_ns = *self;
  other_ns.pid_ns = self->pid_ns + 1;
  other_ns.pid = dead.pid;
  supervisor_id reused = *self;
  reused.start_time = self->start_time + 1;
  const std::vector<std::string> left_alone{"not-a-supervisor", other_ns.name()};
  for (const auto& own : owns)
    ::rmdir((own + "/castellan/" + left_alone[0]).c_str()); // left by an interrupted run
  for (const auto& own : owns)
    for (const auto& n : std::vector<std::string>{left_alone[0], left_alone[1], reused.name()})
      BOOST_REQUIRE_MESSAGE(::mkdir((own + "/castellan/" + n).c_str(), 0755) == 0,
                            own << "/castellan/" << n << ": " << std::strerror(errno));

  BOOST_REQUIRE_EQUAL(::kill(dead.pid, SIGKILL), 0);
  const int status = reap(dead.pid);
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  // The killed supervisor's worker task outlives it, frozen.
  BOOST_TEST(!ends_within(dead_task.get(), 50));

  auto report = reclaim_dead_subtrees(*layout, *self);
  BOOST_REQUIRE_MESSAGE(report, (report ? "" : report.error().describe()));
  auto has = [](const std::vector<std::string>& v, const std::string& x) {
    return std::find(v.begin(), v.end(), x) != v.end();
  };
  BOOST_TEST(has(report->reclaimed, dead.name));
  BOOST_TEST(has(report->reclaimed, reused.name()));
  BOOST_TEST(has(report->live, live.name));
  BOOST_TEST(has(report->foreign, "not-a-supervisor (not a supervisor id)"));
  BOOST_TEST(has(report->foreign, other_ns.name() + " (another pid namespace)"));
  BOOST_TEST(!has(report->reclaimed, self->name()));
  BOOST_TEST(report->failed.empty());
  BOOST_TEST(report->tasks_killed >= 1u);
  // Whatever else was reclaimed (other supervisors on this machine that
  // died) was dead too.
  for (const auto& n : report->reclaimed) {
    auto id = supervisor_id::parse(n);
    BOOST_REQUIRE(id);
    auto start = process_start_time(id->pid);
    BOOST_REQUIRE(start);
    BOOST_TEST((!*start || **start != id->start_time), n);
  }

  BOOST_TEST(ends_within(dead_task.get(), 2000)); // thawed and killed
  for (const auto& own : owns) {
    BOOST_TEST(!is_dir(own + "/castellan/" + dead.name), own);
    BOOST_TEST(!is_dir(own + "/castellan/" + reused.name()), own);
    BOOST_TEST(is_dir(own + "/castellan/" + live.name), own);
    for (const auto& n : left_alone)
      BOOST_TEST(is_dir(own + "/castellan/" + n), own << "/castellan/" << n);
  }
  BOOST_TEST(!ends_within(live_task.get(), 0)); // the live one's task untouched

  // A second start finds nothing more to take from the live one.
  auto again = reclaim_dead_subtrees(*layout, *self);
  BOOST_REQUIRE(again);
  BOOST_TEST(!has(again->reclaimed, live.name));
  BOOST_TEST(has(again->live, live.name));

  // The live one ends normally: its worker and subtree go with it.
  BOOST_REQUIRE_EQUAL(::write(live.release.get(), "x", 1), 1);
  const int live_status = reap(live.pid);
  BOOST_TEST((WIFEXITED(live_status) && WEXITSTATUS(live_status) == 0), live_status);
  BOOST_TEST(ends_within(live_task.get(), 2000));
  for (const auto& own : owns) {
    BOOST_TEST(!is_dir(own + "/castellan/" + live.name), own);
    for (const auto& n : left_alone)
      BOOST_TEST(::rmdir((own + "/castellan/" + n).c_str()) == 0, own << "/castellan/" << n);
  }
}

BOOST_AUTO_TEST_CASE(worker_cgroups_live_in_the_subtree_and_it_goes_at_the_end) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout))
    return;
  auto self = supervisor_id::self();
  BOOST_REQUIRE(self);
  std::vector<std::string> dirs;
  {
    auto subtree = cgroup_subtree::create(*layout, *self);
    BOOST_REQUIRE_MESSAGE(subtree, (subtree ? "" : subtree.error().describe()));
    // Never adopt: a second one of the same name is refused.
    BOOST_TEST(!cgroup_subtree::create(*layout, *self));
    dirs = subtree->directories();
    BOOST_TEST(dirs.size() == own_dirs(*layout).size());
    auto cg = worker_cgroup::create(subtree->layout(), worker_cgroup::unique_name("castellan-w"),
                                    cgroup_limits{});
    BOOST_REQUIRE_MESSAGE(cg, (cg ? "" : cg.error().describe()));
    for (const auto& d : cg->directories()) {
      const bool inside = std::any_of(dirs.begin(), dirs.end(), [&](const std::string& s) {
        return d.rfind(s + "/", 0) == 0;
      });
      BOOST_TEST(inside, d);
    }
    // A worker cgroup left in it when the supervisor ends is taken along.
    auto leftover = worker_cgroup::create(subtree->layout(),
                                          worker_cgroup::unique_name("castellan-w"), {});
    BOOST_REQUIRE(leftover);
    for (const auto& d : dirs)
      BOOST_TEST(is_dir(d), d);
    auto removed = subtree->remove();
    BOOST_TEST(static_cast<bool>(removed), (removed ? "" : removed.error().describe()));
  }
  for (const auto& d : dirs)
    BOOST_TEST(!is_dir(d), d);
}

BOOST_AUTO_TEST_SUITE_END()
