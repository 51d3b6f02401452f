// Worker cgroups against the real kernel (v1 here; v2 where it has the
// controllers).

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <ctime>

#include "child_process.hpp"
#include "platform/linux/cgroups.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

/// Skips (with the reason) when this process cannot manage cgroups at all.
bool have_cgroups(const outcome<cgroup_layout>& layout, std::initializer_list<const char*> need) {
  if (!layout) {
    castellan::test::skip(std::string("no cgroup layout: ") + layout.error().describe());
    return false;
  }
  for (const char* c : need)
    if (!layout->find(c)) {
      castellan::test::skip(std::string("the '") + c + "' controller is on neither cgroup v1 nor v2");
      return false;
    }
  return true;
}

/// A forked child that blocks until released, then runs `fn` and exits.
struct held_child {
  pid_t pid = -1;
  unique_fd pidfd;
  unique_fd release;
};

template <class F>
held_child fork_held(F fn) {
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  held_child h;
  h.pid = ::fork();
  BOOST_REQUIRE(h.pid >= 0);
  if (h.pid == 0) {
    ::close(p[1]);
    char go;
    if (::read(p[0], &go, 1) != 1)
      ::_exit(90);
    ::_exit(fn());
  }
  ::close(p[0]);
  h.release.reset(p[1]);
  h.pidfd.reset(static_cast<int>(::syscall(SYS_pidfd_open, h.pid, 0)));
  return h;
}

/// This process's CPU time so far, in microseconds.
uint64_t cpu_time_us() {
  timespec ts{};
  ::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000u + static_cast<uint64_t>(ts.tv_nsec) / 1000u;
}

/// Waits (at most `timeout_ms`, a safety net) for `h` to exit and reaps it.
exit_status wait_for(const held_child& h, int timeout_ms) {
  pollfd pfd{h.pidfd.get(), POLLIN, 0};
  if (::poll(&pfd, 1, timeout_ms) != 1) {
    ::kill(h.pid, SIGKILL);
    BOOST_ERROR("child " << h.pid << " did not exit within " << timeout_ms << " ms");
  }
  auto st = pidfd_reap(h.pidfd.get());
  BOOST_REQUIRE(st);
  return *st;
}

} // namespace

BOOST_AUTO_TEST_SUITE(cgroups_tests)

BOOST_AUTO_TEST_CASE(layout_parsing) {
  // v1 with cpu/cpuacct co-mounted, memory nested, and a v2 without controllers.
  const std::string mountinfo =
    "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "36 31 0:33 /outer /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";
  const std::string self = "3:cpu,cpuacct:/\n4:memory:/a/b\n5:pids:/outer/x\n0::/\n";
  auto l = cgroup_layout::parse(mountinfo, self, "");
  BOOST_REQUIRE(l);
  BOOST_REQUIRE(l->find("memory"));
  BOOST_TEST(l->find("memory")->own_dir == "/sys/fs/cgroup/memory/a/b");
  BOOST_TEST(l->find("cpu")->own_dir == "/sys/fs/cgroup/cpu,cpuacct");
  BOOST_TEST(l->find("cpuacct")->own_dir == "/sys/fs/cgroup/cpu,cpuacct");
  BOOST_TEST(l->find("pids")->own_dir == "/sys/fs/cgroup/pids/x");
  BOOST_TEST(!l->find("freezer"));
  BOOST_TEST(l->v2_own_dir() == "/sys/fs/cgroup/unified");
  // The same v2 with controllers: they move to v2.
  auto l2 = cgroup_layout::parse(mountinfo, self, "cpu memory pids");
  BOOST_REQUIRE(l2);
  BOOST_TEST((l2->find("memory")->version == cgroup_version::v2));
  BOOST_TEST(l2->find("memory")->own_dir == "/sys/fs/cgroup/unified");
  BOOST_TEST((l2->find("cpuacct")->version == cgroup_version::v1));
  BOOST_TEST(!cgroup_layout::parse(mountinfo, "garbage\n", ""));
}

BOOST_AUTO_TEST_CASE(detected_layout_is_below_our_own_cgroups) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"memory", "pids", "cpu"}))
    return;
  auto self = read_text_file("/proc/self/cgroup");
  BOOST_REQUIRE(self);
  for (const auto& c : layout->controllers()) {
    BOOST_TEST_MESSAGE(c.name << " = " << to_string(c.version) << " " << c.own_dir);
    BOOST_TEST(path_exists(c.own_dir + "/cgroup.procs"), c.own_dir);
  }
}

BOOST_AUTO_TEST_CASE(limits_are_written_read_back_and_removal_leaves_nothing) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"memory", "pids", "cpu"}))
    return;
  cgroup_limits limits;
  limits.memory_bytes = 64ull << 20;
  limits.pids = 16;
  limits.cpu_percent = 50;
  const std::string name = worker_cgroup::unique_name("castellan-test");
  auto cg = worker_cgroup::create(*layout, name, limits);
  BOOST_REQUIRE_MESSAGE(cg, (cg ? "" : cg.error().describe()));
  const auto dirs = cg->directories();
  BOOST_TEST_MESSAGE("cgroup " << cg->describe());
  for (const auto& d : dirs) {
    BOOST_TEST(path_exists(d));
    // Below our own cgroup of that hierarchy, never elsewhere.
    bool below = false;
    for (const auto& c : layout->controllers())
      below = below || d == c.own_dir + "/" + name;
    BOOST_TEST(below, d);
  }
  auto applied = cg->applied_limits();
  BOOST_REQUIRE(applied);
  BOOST_TEST(applied->memory_bytes.value_or(0) == 64ull << 20);
  if (applied->memory_swap_bytes)
    BOOST_TEST(*applied->memory_swap_bytes == (layout->find("memory")->version == cgroup_version::v1
                                                 ? 64ull << 20
                                                 : 0u));
  BOOST_TEST(applied->pids.value_or(0) == 16u);
  BOOST_TEST(applied->cpu_quota_us.value_or(0) == 50'000u);
  BOOST_TEST(applied->cpu_period_us.value_or(0) == 100'000u);
  BOOST_REQUIRE(cg->remove());
  for (const auto& d : dirs)
    BOOST_TEST(!path_exists(d), d << " still exists");
  // An existing cgroup is never adopted.
  auto first = worker_cgroup::create(*layout, name, limits);
  BOOST_REQUIRE(first);
  auto second = worker_cgroup::create(*layout, name, limits);
  BOOST_REQUIRE(!second);
  BOOST_TEST(second.error().code == EEXIST);
  BOOST_TEST(path_exists(first->directories().front()));
}

BOOST_AUTO_TEST_CASE(attach_usage_kill_and_remove) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"memory", "pids", "cpu"}))
    return;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-test"), {});
  BOOST_REQUIRE(cg);
  // The child says when it has done its work: the usage is read after that
  // event, not after a guessed delay.
  int done_pipe[2];
  BOOST_REQUIRE_EQUAL(::pipe2(done_pipe, O_CLOEXEC), 0);
  unique_fd done_rd(done_pipe[0]), done_wr(done_pipe[1]);
  const int done = done_wr.get();
  auto child = fork_held([done] {
    // Some memory (charged here: it is touched after the attach)…
    const std::size_t size = 8u << 20;
    auto* mem = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    for (std::size_t i = 0; mem != MAP_FAILED && i < size; i += 4096)
      mem[i] = 1;
    // …and at least 50 ms of its own CPU time, however busy the machine is.
    volatile uint64_t x = 0;
    for (uint64_t i = 0; cpu_time_us() < 50'000; ++i)
      x = x + i;
    if (::write(done, "d", 1) != 1)
      return 92;
    ::pause();
    return 0;
  });
  done_wr.reset();
  BOOST_REQUIRE(cg->attach(child.pid));
  auto pids = cg->pids();
  BOOST_REQUIRE(pids);
  BOOST_TEST(pids->size() == 1u);
  BOOST_TEST(pids->front() == child.pid);
  BOOST_REQUIRE(::write(child.release.get(), "g", 1) == 1);
  pollfd pfd{done_rd.get(), POLLIN, 0};
  char byte = 0;
  BOOST_REQUIRE_MESSAGE(::poll(&pfd, 1, 30'000) == 1 && ::read(done_rd.get(), &byte, 1) == 1,
                        "the child did not report its memory touched and CPU time used in 30 s");
  auto usage = cg->usage();
  BOOST_REQUIRE(usage);
  BOOST_TEST(usage->pids_current.value_or(0) == 1u);
  BOOST_TEST(usage->cpu_usec.value_or(0) > 10'000u, "cpu " << usage->cpu_usec.value_or(0));
  BOOST_TEST(usage->memory_peak_bytes.value_or(0) >= 8u << 20);
  BOOST_TEST(usage->oom_kills.value_or(99) == 0u);
  BOOST_TEST_MESSAGE("usage: cpu " << usage->cpu_usec.value_or(0) << " us, peak "
                                   << usage->memory_peak_bytes.value_or(0) << " bytes");
  BOOST_REQUIRE(cg->kill_all());
  auto st = wait_for(child, 30'000);
  BOOST_TEST(st.signaled);
  BOOST_TEST(st.signal == SIGKILL);
  const auto dirs = cg->directories();
  BOOST_REQUIRE(cg->remove());
  for (const auto& d : dirs)
    BOOST_TEST(!path_exists(d), d << " still exists");
}

BOOST_AUTO_TEST_CASE(memory_hog_is_oom_killed_and_counted) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"memory"}))
    return;
  cgroup_limits limits;
  limits.memory_bytes = 64ull << 20;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-test"), limits);
  BOOST_REQUIRE(cg);
  auto hog = fork_held([] {
    const std::size_t size = 512ull << 20;
    auto* p = static_cast<char*>(::mmap(nullptr, size, PROT_READ | PROT_WRITE,
                                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    if (p == MAP_FAILED)
      return 91;
    for (std::size_t i = 0; i < size; i += 4096)
      p[i] = 1;
    return 0; // not reached under the limit
  });
  BOOST_REQUIRE(cg->attach(hog.pid));
  BOOST_REQUIRE(::write(hog.release.get(), "g", 1) == 1);
  auto st = wait_for(hog, 60'000);
  BOOST_TEST(st.signaled, st.describe());
  BOOST_TEST(st.signal == SIGKILL);
  auto usage = cg->usage();
  BOOST_REQUIRE(usage);
  BOOST_TEST(usage->oom_kills.value_or(0) >= 1u);
  BOOST_TEST(usage->memory_peak_bytes.value_or(UINT64_MAX) <= (64ull << 20));
  BOOST_TEST_MESSAGE("oom kills " << usage->oom_kills.value_or(0) << ", peak "
                                  << usage->memory_peak_bytes.value_or(0));
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_CASE(fork_loop_stops_at_pids_max) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"pids"}))
    return;
  cgroup_limits limits;
  limits.memory_bytes = 0;
  limits.cpu_percent = 0;
  limits.pids = 8;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-test"), limits);
  BOOST_REQUIRE(cg);
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  unique_fd rd(p[0]), wr(p[1]);
  // The bomb's children are reaped by a subreaper in between, so that no
  // zombie is left to anyone else.
  auto body = [&]() -> std::string {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    const int report = wr.get();
    auto bomb = fork_held([report] {
      int made = 0;
      for (int i = 0; i < 100; ++i) {
        const pid_t c = ::fork();
        if (c < 0) {
          const int result[2] = {made, errno};
          if (::write(report, result, sizeof result) != sizeof result)
            return 1;
          ::pause();
        }
        if (c == 0) {
          ::pause();
          ::_exit(0);
        }
        ++made;
      }
      return 2;
    });
    if (auto r = cg->attach(bomb.pid); !r)
      return "attach: " + r.error().describe();
    if (::write(bomb.release.get(), "g", 1) != 1)
      return "release failed";
    int result[2] = {-1, 0};
    pollfd pfd{rd.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 30'000) != 1 || ::read(rd.get(), result, sizeof result) != sizeof result)
      return "the fork loop never hit the limit";
    std::string err;
    if (result[0] != 7 || result[1] != EAGAIN)
      err += "forked " + std::to_string(result[0]) + " before " +
             castellan::test::err_text(result[1]) + " (expected 7, EAGAIN)\n";
    auto usage = cg->usage();
    if (!usage || usage->pids_current.value_or(0) != 8)
      err += "pids.current is not 8\n";
    if (auto r = cg->kill_all(); !r)
      err += "kill_all: " + r.error().describe() + "\n";
    while (::waitpid(-1, nullptr, 0) > 0) {
    }
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
  auto pids = cg->pids();
  BOOST_REQUIRE(pids);
  BOOST_TEST(pids->empty());
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_CASE(spawned_worker_runs_inside_its_cgroup) {
  auto layout = cgroup_layout::detect();
  if (!have_cgroups(layout, {"memory", "pids", "cpu"}))
    return;
  const cgroup_limits limits;
  auto cg = worker_cgroup::create(*layout, worker_cgroup::unique_name("castellan-test"), limits);
  BOOST_REQUIRE(cg);
  worker_spec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", "cat /proc/self/cgroup; exec sleep 30"};
  spec.isolation = isolation_mode::namespaces;
  spec.namespaces = {true, true, true, true, true, true, true};
  spec.limits = {limits.memory_bytes, limits.pids, limits.cpu_percent};
  spec.cgroup = cg->placement();
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  unique_fd rd(p[0]), wr(p[1]);
  spec.fds = {{wr.get(), 1}};
  auto child = spawn_worker(spec);
  BOOST_REQUIRE_MESSAGE(child, (child ? "" : child.error().describe()));
  wr.reset();
  auto pids = cg->pids();
  BOOST_REQUIRE(pids);
  BOOST_TEST((std::find(pids->begin(), pids->end(), child->pid) != pids->end()));
  // Inside, its cgroup namespace is rooted at its own cgroup.
  std::string out;
  char buf[1024];
  pollfd pfd{rd.get(), POLLIN, 0};
  while (out.find("memory:") == std::string::npos && ::poll(&pfd, 1, 30'000) == 1) {
    const ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  BOOST_TEST(out.find(":memory:/\n") != std::string::npos, out);
  BOOST_REQUIRE(cg->kill_all());
  auto st = pidfd_reap(child->pidfd.get());
  BOOST_REQUIRE(st);
  BOOST_TEST(st->signal == SIGKILL);
  BOOST_REQUIRE(cg->remove());
}

BOOST_AUTO_TEST_SUITE_END()
