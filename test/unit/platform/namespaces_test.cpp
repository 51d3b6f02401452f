// spawn_worker with isolation_mode::namespaces, and clone_sandboxed, against
// the real kernel.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>

#include "child_process.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/enforcement_report.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/namespaces.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::run_capturing;

namespace {

worker_spec sandboxed(std::string executable, std::vector<std::string> argv) {
  worker_spec spec;
  spec.executable = std::move(executable);
  spec.argv = std::move(argv);
  spec.env = {"PATH=/usr/bin:/bin"};
  spec.isolation = isolation_mode::namespaces;
  spec.namespaces = {true, true, true, true, true, true, true};
  return spec;
}


std::string status_field(const std::string& status, const std::string& key) {
  std::istringstream in(status);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(key + ":", 0) == 0) {
      std::string v = line.substr(key.size() + 1);
      v.erase(0, v.find_first_not_of(" \t"));
      v.erase(v.find_last_not_of(" \t") + 1);
      return v;
    }
  return "<absent>";
}

} // namespace

BOOST_AUTO_TEST_SUITE(namespaces_tests)

BOOST_AUTO_TEST_CASE(worker_is_pid_1_as_the_sandbox_user_with_its_hostname) {
  auto spec = sandboxed("/bin/sh", {"sh", "-c",
                                    "echo $$; id -u; id -g; cat /proc/sys/kernel/hostname; "
                                    "cat /proc/self/status"});
  spec.hostname = "castellan-test";
  auto [st, out] = run_capturing(spec, true);
  BOOST_TEST(st.code == 0, out);
  std::istringstream in(out);
  std::string pid, uid, gid, host;
  std::getline(in, pid);
  std::getline(in, uid);
  std::getline(in, gid);
  std::getline(in, host);
  BOOST_TEST(pid == "1");
  BOOST_TEST(uid == "1000");
  BOOST_TEST(gid == "1000");
  BOOST_TEST(host == "castellan-test");
  // No supplementary group survives from the supervisor; only the setup
  // capabilities are left, and only inside the worker's own user namespace.
  BOOST_TEST(status_field(out, "Groups") == "");
  const auto setup = setup_capability_mask();
  char expected[32];
  std::snprintf(expected, sizeof expected, "%016llx", static_cast<unsigned long long>(setup));
  BOOST_TEST(status_field(out, "CapEff") == expected);
  BOOST_TEST(status_field(out, "CapAmb") == expected);
  BOOST_TEST(status_field(out, "NSpid").find(' ') == std::string::npos,
             "NSpid shows one pid only from inside: " << status_field(out, "NSpid"));
}

BOOST_AUTO_TEST_CASE(without_setup_capabilities_the_worker_has_none) {
  auto spec = sandboxed("/bin/sh", {"sh", "-c", "cat /proc/self/status"});
  spec.setup_capabilities = false;
  auto [st, out] = run_capturing(spec, true);
  BOOST_TEST(st.code == 0, out);
  BOOST_TEST(status_field(out, "CapEff") == "0000000000000000");
  BOOST_TEST(status_field(out, "CapPrm") == "0000000000000000");
  BOOST_TEST(status_field(out, "CapAmb") == "0000000000000000");
}

BOOST_AUTO_TEST_CASE(id_maps_never_reach_host_root_and_namespaces_are_in_force) {
  auto spec = sandboxed("/bin/sleep", {"sleep", "30"});
  auto child = spawn_worker(spec);
  BOOST_REQUIRE_MESSAGE(child, (child ? "" : child.error().describe()));
  const std::string proc = "/proc/" + std::to_string(child->pid);
  auto uid_map = read_text_file(proc + "/uid_map");
  auto gid_map = read_text_file(proc + "/gid_map");
  BOOST_REQUIRE(uid_map);
  BOOST_REQUIRE(gid_map);
  std::istringstream u(*uid_map), g(*gid_map);
  uint64_t inside = 0, outside = 0, count = 0;
  u >> inside >> outside >> count;
  BOOST_TEST(inside == 1000u);
  BOOST_TEST(outside == (::geteuid() == 0 ? 65534u : ::geteuid()));
  BOOST_TEST(count == 1u);
  g >> inside >> outside >> count;
  BOOST_TEST(inside == 1000u);
  BOOST_TEST(outside != 0u);
  BOOST_TEST(count == 1u);

  auto report = spawn_enforcement(spec, child->pid);
  BOOST_REQUIRE(report);
  BOOST_TEST(report->namespaces_in_force == report->namespaces_requested,
             "in force: " << report->to_json());
  BOOST_TEST(report->namespaces_in_force.size() == 7u);
  BOOST_TEST(report->network.find("private") != std::string::npos);

  BOOST_REQUIRE(pidfd_signal(child->pidfd.get(), SIGKILL));
  BOOST_REQUIRE(pidfd_reap(child->pidfd.get()));
}

BOOST_AUTO_TEST_CASE(unsafe_or_unenforceable_specs_are_refused) {
  auto spec = sandboxed("/bin/true", {"true"});
  spec.ids.outside_uid = 0;
  auto root = spawn_worker(spec);
  BOOST_REQUIRE(!root);
  BOOST_TEST(root.error().message.find("host root") != std::string::npos, root.error().message);

  spec = sandboxed("/bin/true", {"true"});
  spec.ids.inside_uid = 0;
  BOOST_TEST(!spawn_worker(spec));

  spec = sandboxed("/bin/true", {"true"});
  spec.namespaces.user = false;
  auto no_user = spawn_worker(spec);
  BOOST_REQUIRE(!no_user);
  BOOST_TEST(no_user.error().message.find("user namespace") != std::string::npos);

  spec = sandboxed("/bin/true", {"true"});
  spec.limits.memory_bytes = 64 << 20;
  auto no_cgroup = spawn_worker(spec);
  BOOST_REQUIRE(!no_cgroup);
  BOOST_TEST(no_cgroup.error().message.find("no cgroup") != std::string::npos);

  spec = sandboxed("/bin/true", {"true"});
  spec.namespaces.uts = false;
  spec.hostname = "x";
  BOOST_TEST(!spawn_worker(spec));
}

BOOST_AUTO_TEST_CASE(a_missing_executable_is_named_before_the_clone) {
  // The caller opens the executable (the child runs it from that fd).
  auto spec = sandboxed("/nonexistent/castellan-worker", {"x"});
  auto child = spawn_worker(spec);
  BOOST_REQUIRE(!child);
  BOOST_TEST(child.error().code == ENOENT);
  BOOST_TEST(child.error().message.find("open /nonexistent/castellan-worker") != std::string::npos,
             child.error().message);
}

BOOST_AUTO_TEST_CASE(exec_failure_names_the_step_the_path_and_errno) {
  // A file the caller can open but nobody may execute fails in the child.
  char path[] = "/var/tmp/castellan-not-executable-XXXXXX";
  unique_fd f(::mkstemp(path));
  BOOST_REQUIRE(f);
  BOOST_REQUIRE(::fchmod(f.get(), 0644) == 0);
  f.reset();
  auto spec = sandboxed(path, {"x"});
  auto child = spawn_worker(spec);
  ::unlink(path);
  BOOST_REQUIRE(!child);
  BOOST_TEST(child.error().code == EACCES);
  BOOST_TEST(child.error().message.find(path) != std::string::npos, child.error().message);
  BOOST_TEST(child.error().message.find("execve") != std::string::npos, child.error().message);
}

BOOST_AUTO_TEST_CASE(only_mapped_fds_reach_the_sandboxed_worker) {
  unique_fd leaky(::open("/dev/null", O_RDONLY)); // no O_CLOEXEC on purpose
  BOOST_REQUIRE(leaky);
  auto spec = sandboxed("/bin/sh", {"sh", "-c", "ls /proc/self/fd"});
  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  spec.fds = {{devnull.get(), 0}, {devnull.get(), 2}, {devnull.get(), 7}};
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  unique_fd rd(p[0]), wr(p[1]);
  spec.fds.push_back({wr.get(), 1});
  auto child = spawn_worker(spec);
  BOOST_REQUIRE_MESSAGE(child, (child ? "" : child.error().describe()));
  wr.reset();
  std::string out;
  char buf[256];
  pollfd pfd{rd.get(), POLLIN, 0};
  while (::poll(&pfd, 1, 10'000) == 1) {
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  BOOST_REQUIRE(pidfd_reap(child->pidfd.get()));
  BOOST_TEST(out == "0\n1\n2\n3\n7\n"); // 3: the directory ls reads
}

BOOST_AUTO_TEST_CASE(the_worker_dies_with_its_parent) {
  // An intermediate process spawns the worker and exits: PR_SET_PDEATHSIG
  // must take the worker (PID 1 of its namespace) down with it.
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  unique_fd rd(p[0]), wr(p[1]);
  const pid_t middle = ::fork();
  BOOST_REQUIRE(middle >= 0);
  if (middle == 0) {
    auto spec = sandboxed("/bin/sleep", {"sleep", "60"});
    auto child = spawn_worker(spec);
    pid_t pid = child ? child->pid : -1;
    ssize_t ignored = ::write(wr.get(), &pid, sizeof pid);
    (void)ignored;
    ::_exit(0);
  }
  wr.reset();
  pid_t worker = -1;
  pollfd pfd{rd.get(), POLLIN, 0};
  BOOST_REQUIRE(::poll(&pfd, 1, 10'000) == 1);
  BOOST_REQUIRE(::read(rd.get(), &worker, sizeof worker) == static_cast<ssize_t>(sizeof worker));
  BOOST_REQUIRE(worker > 0);
  int st = 0;
  BOOST_REQUIRE(::waitpid(middle, &st, 0) == middle);
  // Gone, or a zombie waiting for whoever inherited it: its pidfd becomes
  // readable when it exits (ESRCH: reaped already). 30 s is a safety net.
  bool dead = false;
  if (unique_fd pidfd{static_cast<int>(::syscall(SYS_pidfd_open, worker, 0))}; !pidfd) {
    dead = errno == ESRCH;
  } else {
    pollfd exited{pidfd.get(), POLLIN, 0};
    dead = ::poll(&exited, 1, 30'000) == 1;
  }
  BOOST_TEST(dead, "worker " << worker << " outlived its parent");
}

BOOST_AUTO_TEST_CASE(clone_sandboxed_reports_the_failing_step) {
  auto options = castellan::test::all_namespaces();
  options.hostname = std::string(100, 'h'); // longer than HOST_NAME_MAX
  auto fn = [](sandbox_child& self) -> int {
    self.started();
    return 0;
  };
  auto child = clone_sandboxed(options, fn);
  BOOST_REQUIRE(!child);
  BOOST_TEST(child.error().code == EINVAL);
  BOOST_TEST(child.error().message.find("sethostname") != std::string::npos,
             child.error().message);
}

BOOST_AUTO_TEST_SUITE_END()
