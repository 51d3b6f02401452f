// The sandbox as the pool's workers get it: identity and layers seen from
// inside, the enforcement report on every result, and the cgroup limits
// (memory → oom, pids → a contained fork bomb) with the pool recovering.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include <unistd.h>

#include <nlohmann/json.hpp>

#include "platform/linux/landlock.hpp"
#include "support/pool_fixture.hpp"
#include "support/sanitizers.hpp"

using namespace castellan;

namespace {

using sandbox_fixture = test::pool_fixture;

std::map<std::string, std::string> key_values(const std::string& text) {
  std::map<std::string, std::string> out;
  std::istringstream in(text);
  std::string k, v;
  while (in >> k >> v)
    out[k] = v;
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(sandbox_tests, sandbox_fixture)

BOOST_AUTO_TEST_CASE(code_runs_as_pid_2_behind_seccomp_and_no_new_privs) {
  // Shared mode: the code runs in the harness (pid 2); the isolated mode's
  // exec process is checked below.
  auto pc = test_pool(1);
  pc.mode = exec_mode::shared;
  auto pool = make(pc);
  auto r = exec_code(pool, R"PY(
import os
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return line.split()[1]
print("pid", os.getpid())
print("ppid", os.getppid())
print("uid", os.getuid())
print("gid", os.getgid())
print("seccomp", status("Seccomp"))
print("nnp", status("NoNewPrivs"))
print("capeff", status("CapEff"))
import socket
print("hostname", socket.gethostname())
print("ifaces", ",".join(sorted(n for _, n in socket.if_nameindex())))
)PY");
  BOOST_TEST_MESSAGE(r.stdout_data << r.stderr_data);
  BOOST_REQUIRE((r.error == error_class::ok));
  auto kv = key_values(r.stdout_data);
  BOOST_TEST(kv["pid"] == "2");
  BOOST_TEST(kv["ppid"] == "1");
  BOOST_TEST(kv["uid"] == "1000");
  BOOST_TEST(kv["gid"] == "1000");
  BOOST_TEST(kv["seccomp"] == "2");
  BOOST_TEST(kv["nnp"] == "1");
  BOOST_TEST(kv["capeff"] == "0000000000000000");
  BOOST_TEST(kv["hostname"] == "castellan");
  BOOST_TEST(kv["ifaces"] == "lo");
}

BOOST_AUTO_TEST_CASE(isolated_mode_serves_execs_from_processes_that_are_not_dumpable) {
  auto pc = test_pool(1);
  pc.mode = exec_mode::isolated;
  auto pool = make(pc);
  // Seen from inside: the exec's process (pid 4, in its own Landlock domain)
  // is dumpable, so the files of its /proc/self are its own uid's.
  auto r = exec_code(pool, "import os\nprint(os.getpid(), os.stat('/proc/self/environ').st_uid)\n");
  BOOST_REQUIRE_MESSAGE((r.error == error_class::ok), r.detail << r.stderr_data);
  BOOST_TEST(r.stdout_data == "4 1000\n");
  // Seen from the host: the worker is a child of this process (of one of
  // its threads); its init's child is the harness, whose child is the
  // zygote. The files of a process that is not dumpable in /proc/<pid> are
  // owned by root; a dumpable one's by the worker's uid.
  auto children = [](pid_t pid, const std::string& tid) {
    std::vector<pid_t> out;
    std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + tid + "/children");
    for (pid_t c; in >> c;)
      out.push_back(c);
    return out;
  };
  auto owner = [](pid_t pid) {
    struct stat st {};
    return ::stat(("/proc/" + std::to_string(pid) + "/environ").c_str(), &st) == 0
             ? st.st_uid
             : static_cast<uid_t>(-1);
  };
  int found = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    for (const pid_t init : children(::getpid(), task.path().filename().string())) {
      const auto harness = children(init, std::to_string(init));
      if (harness.size() != 1)
        continue;
      const auto zygote = children(harness[0], std::to_string(harness[0]));
      if (zygote.size() != 1)
        continue;
      ++found;
      for (const pid_t pid : {init, harness[0], zygote[0]})
        BOOST_TEST(owner(pid) == 0u, "pid " << pid << " is owned by " << owner(pid));
      // castellan-worker leads a session and process group of its own: a
      // call aimed at a process group reaches no other worker (and the
      // pool's group kill, aimed at the init's pid, reaches this one).
      BOOST_TEST(::getsid(init) == init);
      BOOST_TEST(::getpgid(init) == init);
      BOOST_TEST(::getpgid(init) != ::getpgrp());
    }
  }
  BOOST_TEST(found == 1);
}

BOOST_AUTO_TEST_CASE(every_result_carries_the_enforcement_report) {
  auto pool = make(test_pool(1));
  auto r = exec_code(pool, "print(1)");
  BOOST_REQUIRE((r.error == error_class::ok));
  BOOST_REQUIRE(!r.enforcement.empty());
  auto j = nlohmann::json::parse(r.enforcement);
  BOOST_TEST_MESSAGE(j.dump(1).substr(0, 1500));
  BOOST_TEST(j["namespaces"]["in_force"].size() == 7u);
  BOOST_TEST(j["network"].get<std::string>().find("loopback") != std::string::npos);
  BOOST_TEST(j["start"] == (warm_start_requested() ? "warm" : "exec"));
  BOOST_TEST(j["cgroup"]["requested"]["memory_bytes"] == 256ull << 20);
  BOOST_TEST(j["cgroup"]["in_force"]["pids"] == 32);
  BOOST_TEST(j["seccomp"]["enforced"] == true);
  BOOST_TEST(j["seccomp"]["mode"] == "filter");
  BOOST_TEST(j["root"]["read_only"] == true);
  if (platform::landlock_abi() > 0) {
    BOOST_TEST(j["landlock"]["enforced"] == true);
    BOOST_TEST(j["landlock"]["abi"] == platform::landlock_abi());
  }
  BOOST_TEST(j["capabilities"]["effective"] == "none");
}

BOOST_AUTO_TEST_CASE(usage_is_measured_per_exec) {
  auto pool = make(test_pool(1));
  auto busy = exec_code(pool, "x = bytearray(48 << 20)\nn = 0\nfor i in range(2_000_000): n += i\n");
  BOOST_REQUIRE((busy.error == error_class::ok));
  BOOST_TEST_MESSAGE("cpu " << busy.usage.cpu_us << " us, peak " << busy.usage.peak_memory_bytes);
  BOOST_TEST(busy.usage.cpu_us > 10'000u);
  BOOST_TEST(busy.usage.peak_memory_bytes > (48ull << 20));
  // The next exec has its own window: the peak was reset.
  auto idle = exec_code(pool, "pass");
  BOOST_TEST(idle.usage.cpu_us < busy.usage.cpu_us);
  if (test::address_sanitizer && warm_start_requested()) {
    // A launched worker's interpreter allocates through the launcher's
    // allocator, which is ASan's here: the freed 48 MiB sit in its
    // quarantine and still count.
    std::cout << "sanitizer build: the peak after a freed allocation is not checked in a "
                 "launched worker\n";
    return;
  }
  BOOST_TEST(idle.usage.peak_memory_bytes < (48ull << 20));
}

BOOST_AUTO_TEST_CASE(memory_limit_ends_in_oom_and_the_pool_recovers) {
  auto pc = test_pool(1);
  pc.limits.memory_bytes = 64ull << 20;
  auto pool = make(pc);
  auto r = exec_code(pool, "x = bytearray(512 << 20)\nprint('survived')");
  BOOST_TEST_MESSAGE(r.detail);
  BOOST_TEST((r.error == error_class::oom));
  BOOST_TEST(r.stdout_data.find("survived") == std::string::npos);
  auto next = exec_code(pool, "print('fine')");
  BOOST_TEST((next.error == error_class::ok));
  BOOST_TEST(next.stdout_data == "fine\n");
}

BOOST_AUTO_TEST_CASE(fork_bomb_is_contained_and_the_pool_recovers) {
  auto pc = test_pool(1);
  pc.default_timeout_ms = 5000;
  auto pool = make(pc);
  auto r = exec_code(pool, R"PY(
import os, errno
children = 0
err = None
for i in range(1000):
    try:
        pid = os.fork()
    except OSError as e:
        err = errno.errorcode.get(e.errno, str(e.errno))
        break
    if pid == 0:
        import time
        time.sleep(30)
        os._exit(0)
    children += 1
print("children", children, "stopped_by", err)
)PY");
  BOOST_TEST_MESSAGE(r.stdout_data << r.stderr_data << r.detail);
  // The pids limit (32 tasks, the harness's threads included) stops the
  // bomb with EAGAIN long before 1000.
  BOOST_TEST((r.error == error_class::ok));
  auto kv = key_values(r.stdout_data);
  BOOST_TEST(r.stdout_data.find("stopped_by EAGAIN") != std::string::npos);
  BOOST_TEST(std::stoi(kv["children"]) < 32);
  auto next = exec_code(pool, "import os\nprint(len(os.listdir('/proc')) < 40)");
  BOOST_TEST((next.error == error_class::ok));
}

BOOST_AUTO_TEST_CASE(no_memfd_can_be_executable) {
  // vm.memfd_noexec = 2 in the worker's pid namespace: MFD_EXEC is refused,
  // and every other memfd is sealed against exec (no x bit, none to add).
  auto pool = make(test_pool(1));
  auto r = exec_code(pool, R"PY(
import ctypes, errno, os
libc = ctypes.CDLL(None, use_errno=True)
MFD_EXEC = 0x10
print("mfd_exec", "ok" if libc.memfd_create(b"x", MFD_EXEC) >= 0 else errno.errorcode[ctypes.get_errno()])
fd = os.memfd_create("y", 0)
print("mode", oct(os.fstat(fd).st_mode & 0o777))
try:
    os.fchmod(fd, 0o755)
    print("chmod ok")
except OSError as e:
    print("chmod", errno.errorcode[e.errno])
)PY");
  BOOST_TEST_MESSAGE(r.stdout_data << r.stderr_data);
  BOOST_REQUIRE((r.error == error_class::ok));
  auto j = nlohmann::json::parse(r.enforcement);
  if (::geteuid() != 0) {
    std::cout << "not root: vm.memfd_noexec is set only by a supervisor running as root\n";
    BOOST_TEST(j["root"]["memfd_noexec"] != 2);
    return;
  }
  BOOST_TEST(j["root"]["memfd_noexec"] == 2);
  auto kv = key_values(r.stdout_data);
  BOOST_TEST(kv["mfd_exec"] == "EACCES");
  BOOST_TEST(kv["mode"] == "0o666");
  BOOST_TEST(kv["chmod"] == "EPERM");
}

BOOST_AUTO_TEST_CASE(a_program_that_replaced_the_harness_names_no_layer) {
  // The code execs a program that exits with what castellan-worker uses for
  // a layer it could not apply (4 root, 7 Landlock, 9 notify): that is the
  // program's exit status, reported as such; a layer is named only from
  // PID 1's status pipe. Shared mode: there the code runs in the harness
  // itself and so can replace it.
  auto pc = test_pool(1);
  pc.mode = exec_mode::shared;
  auto pool = make(pc);
  for (const char* code : {"4", "7", "9"}) {
    auto r = exec_code(pool, std::string("import os, sys\nos.execv(sys.executable, [sys.executable, "
                                         "'-c', 'import os; os._exit(") +
                               code + ")'])\n");
    BOOST_TEST_MESSAGE(r.detail);
    BOOST_TEST((r.error == error_class::worker_lost));
    BOOST_TEST(r.detail.find(std::string("exited with ") + code +
                             " during the exec without the harness's answer") !=
               std::string::npos);
    BOOST_TEST(r.detail.find("sandbox:") == std::string::npos);
    BOOST_TEST(r.detail.find("could not be") == std::string::npos);
  }
  auto next = exec_code(pool, "print('fine')");
  BOOST_TEST((next.error == error_class::ok));
}

BOOST_AUTO_TEST_CASE(a_layer_that_cannot_be_applied_is_named_from_the_status_pipe) {
  // A bind whose source is missing: PID 1 cannot build the root and says
  // so on its status pipe before it exits; the request is refused with the
  // layer named.
  auto pc = test_pool(1);
  pc.sandbox.extra_paths.push_back(
    {"/var/tmp/castellan-missing-" + std::to_string(::getpid()), false,
     platform::landlock_fs::read_file});
  auto pool = make(pc);
  auto r = exec_code(pool, "print('must not run')");
  BOOST_TEST_MESSAGE(r.detail);
  BOOST_TEST((r.error == error_class::worker_lost));
  BOOST_TEST(r.stdout_data.empty());
  BOOST_TEST(r.detail.find("exited with 4 (sandbox: the root file system could not be built) "
                           "before it was ready") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(isolation_none_still_works_for_development) {
  auto pc = test_pool(1);
  pc.isolation = platform::isolation_mode::none;
  pc.warm_start = false; // a launcher starts sandboxed workers only
  auto pool = make(pc);
  auto r = exec_code(pool, "import os\nprint(os.getpid() != 2)");
  BOOST_TEST((r.error == error_class::ok));
  BOOST_TEST(r.stdout_data == "True\n");
  BOOST_TEST(r.enforcement.empty());
}

BOOST_AUTO_TEST_SUITE_END()
