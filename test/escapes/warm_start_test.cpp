// Warm start (pool_config::warm_start): a worker the launcher clones is the
// worker an exec would have started (identity, fds, environment, signal
// dispositions, interpreter flags, sandbox layers, command line), apart from
// what a fork shares by design; the random module is reseeded in each; a
// launcher that dies is started again; a launcher that would embed another
// interpreter than the pool's is refused.

#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "actors/pool/pool_worker.hpp"
#include "platform/linux/landlock.hpp"
#include "support/pool_fixture.hpp"

using namespace castellan;

namespace {

using warm_fixture = test::pool_fixture;

/// Everything an exec'd worker and a launched one must agree on, one line
/// each (nothing that differs per worker, like pids on the host).
constexpr const char* portrait = R"PY(
import os, signal, sys
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split(":", 1)[1].strip()
print("pid", os.getpid(), "ppid", os.getppid())
print("ids", status("Uid"), status("Gid"), status("Groups"))
print("layers seccomp", status("Seccomp"), "nnp", status("NoNewPrivs"), "capeff", status("CapEff"))
print("signals ignored", status("SigIgn"), "caught", status("SigCgt"), "blocked", status("SigBlk"))
print("fds", sorted(int(fd) for fd in os.listdir("/proc/self/fd")))
print("env", sorted(os.environ.items()))
print("exe", sys.executable, sys.flags.isolated, sys.flags.no_site, sys.flags.dont_write_bytecode)
print("path", sys.path)
print("argv", sys.argv)
print("cwd", os.getcwd())
print("cmdline", open("/proc/self/cmdline", "rb").read().split(b"\0")[:5])
print("comm", open("/proc/self/comm").read().strip())
print("pipe", signal.getsignal(signal.SIGPIPE) is signal.SIG_IGN)
try:
    open("/etc/shadow")
    print("shadow readable")
except OSError as e:
    print("shadow", e.errno)
)PY";

/// The launcher: this process's child named castellan-launc(her), in this
/// pid namespace. A worker it has just cloned (CLONE_PARENT: also our child)
/// keeps that name until its PID 1 renames itself, but it is in a pid
/// namespace of its own.
std::vector<pid_t> launchers() {
  char own_ns[64] = {};
  BOOST_REQUIRE(::readlink("/proc/self/ns/pid", own_ns, sizeof(own_ns) - 1) > 0);
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  BOOST_REQUIRE(d != nullptr);
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(e->d_name));
    if (pid <= 0)
      continue;
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    std::string line, name;
    pid_t ppid = -1;
    while (std::getline(in, line)) {
      if (line.rfind("Name:", 0) == 0)
        name = line.substr(line.find_first_not_of(" \t", 5));
      if (line.rfind("PPid:", 0) == 0)
        ppid = static_cast<pid_t>(std::stoi(line.substr(5)));
    }
    char ns[64] = {};
    const std::string link = "/proc/" + std::to_string(pid) + "/ns/pid";
    if (ppid == ::getpid() && name == "castellan-launc" &&
        ::readlink(link.c_str(), ns, sizeof(ns) - 1) > 0 && std::string(ns) == own_ns)
      out.push_back(pid);
  }
  ::closedir(d);
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(warm_start_tests, warm_fixture)

BOOST_AUTO_TEST_CASE(a_launched_worker_is_what_an_exec_would_have_started) {
  auto cold_pc = test_pool(1);
  cold_pc.warm_start = false;
  auto warm_pc = test_pool(1);
  warm_pc.warm_start = true;
  auto cold = exec_code(make(cold_pc), portrait);
  auto warm = exec_code(make(warm_pc), portrait);
  BOOST_TEST_MESSAGE("exec'd:\n" << cold.stdout_data << cold.stderr_data);
  BOOST_TEST_MESSAGE("launched:\n" << warm.stdout_data << warm.stderr_data);
  BOOST_REQUIRE((cold.error == error_class::ok));
  BOOST_REQUIRE((warm.error == error_class::ok));
  // Line by line, so that a difference names itself.
  std::istringstream a(cold.stdout_data), b(warm.stdout_data);
  std::string la, lb;
  int lines = 0;
  while (std::getline(a, la)) {
    BOOST_REQUIRE(std::getline(b, lb));
    BOOST_TEST(la == lb);
    ++lines;
  }
  BOOST_TEST(!std::getline(b, lb));
  BOOST_TEST(lines == 14);
  // The default (isolated) mode: the exec's own process, the zygote's child.
  BOOST_TEST(warm.stdout_data.find("pid 4 ppid 3") != std::string::npos);
  BOOST_TEST(warm.stdout_data.find("layers seccomp 2 nnp 1 capeff 0000000000000000") !=
             std::string::npos);
  BOOST_TEST(warm.stdout_data.find("comm python3") != std::string::npos);
  BOOST_TEST(warm.stdout_data.find("castellan-launcher") == std::string::npos);
  BOOST_TEST(!warm.enforcement.empty());
}

BOOST_AUTO_TEST_CASE(every_launched_worker_reseeds_random) {
  auto pc = test_pool(1);
  pc.warm_start = true;
  pc.recycle_after = 1; // each exec in a new worker, cloned from the same launcher
  auto pool = make(pc);
  const char* code = "import random\nprint(random.getrandbits(64))";
  auto first = exec_code(pool, code);
  auto second = exec_code(pool, code);
  BOOST_REQUIRE((first.error == error_class::ok));
  BOOST_REQUIRE((second.error == error_class::ok));
  BOOST_TEST(first.stdout_data != second.stdout_data);
}

BOOST_AUTO_TEST_CASE(a_launcher_that_dies_is_started_again) {
  auto pc = test_pool(1);
  pc.warm_start = true;
  pc.recycle_after = 1;
  auto pool = make(pc);
  BOOST_REQUIRE((exec_code(pool, "print(1)").error == error_class::ok));
  const auto before = launchers();
  BOOST_REQUIRE_EQUAL(before.size(), 1u);
  BOOST_REQUIRE(::kill(before.front(), SIGKILL) == 0);
  // The worker it had already started does not depend on it.
  auto second = exec_code(pool, "print(2)");
  BOOST_TEST((second.error == error_class::ok));
  BOOST_TEST(second.stdout_data == "2\n");
  // The one after that needed a new launcher.
  auto third = exec_code(pool, "print(3)");
  BOOST_TEST((third.error == error_class::ok));
  BOOST_TEST(third.stdout_data == "3\n");
  const auto after = launchers();
  BOOST_REQUIRE_EQUAL(after.size(), 1u);
  BOOST_TEST(after.front() != before.front());
}

BOOST_AUTO_TEST_CASE(a_launcher_for_another_interpreter_is_refused) {
  // A real interpreter under a name that says another version: the launcher
  // embeds the one it was built with and refuses to stand in for this one.
  char dir[] = "/var/tmp/castellan-warm-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(dir) != nullptr);
  const std::string other = std::string(dir) + "/python3.99";
  {
    std::ifstream src("/proc/self/exe", std::ios::binary); // any executable will do
    std::ofstream dst(other, std::ios::binary);
    dst << src.rdbuf();
  }
  BOOST_REQUIRE(::chmod(other.c_str(), 0755) == 0);
  auto pc = test_pool(1);
  pc.warm_start = true;
  pc.python = other;
  auto resolved = resolve_pool_config(pc);
  BOOST_REQUIRE_MESSAGE(resolved, (resolved ? "" : resolved.error().describe()));
  auto tpl = prepare_worker_template(*resolved);
  ::unlink(other.c_str());
  ::rmdir(dir);
  BOOST_REQUIRE(!tpl);
  BOOST_TEST_MESSAGE(tpl.error().describe());
  BOOST_TEST(tpl.error().describe().find("is python3.99, but this launcher embeds python3.") !=
             std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_layer_that_cannot_be_applied_ends_a_launched_worker_before_it_is_ready) {
  // A bind whose source is missing: PID 1 cannot build the root, so its
  // interpreter process is never released, and the request is refused with
  // the layer named, as for an exec'd worker.
  auto pc = test_pool(1);
  pc.warm_start = true;
  pc.sandbox.extra_paths.push_back(
    {"/var/tmp/castellan-missing-" + std::to_string(::getpid()), false,
     platform::landlock_fs::read_file});
  auto pool = make(pc);
  exec_request req;
  req.code = "print('must not run')";
  auto r = exec(pool, req);
  BOOST_TEST_MESSAGE(r.detail);
  BOOST_TEST((r.error == error_class::worker_lost));
  BOOST_TEST(r.stdout_data.empty());
  BOOST_TEST(r.detail.find("exited with 4 (sandbox: the root file system could not be built) "
                           "before it was ready") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(warm_start_is_for_sandboxed_pools_only) {
  auto pc = test_pool(1);
  pc.warm_start = true;
  pc.isolation = platform::isolation_mode::none;
  auto resolved = resolve_pool_config(pc);
  BOOST_REQUIRE(!resolved);
  BOOST_TEST(resolved.error().describe().find("warm_start starts sandboxed workers") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
