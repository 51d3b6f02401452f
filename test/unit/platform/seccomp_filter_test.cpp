// The seccomp filter against the real kernel, in forked children.

#include <boost/test/unit_test.hpp>

#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/personality.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <fcntl.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.hpp"
#include "platform/linux/file_io.hpp"
#include "platform/linux/seccomp_filter.hpp"
#include "sandbox_helpers.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::expect_errno;
using castellan::test::expect_ok;

namespace {

std::string status_line(const std::string& key) {
  auto status = read_text_file("/proc/self/status");
  if (!status)
    return "";
  const auto pos = status->find("\n" + key + ":");
  if (pos == std::string::npos)
    return "";
  const auto start = status->find_first_not_of(" \t", pos + key.size() + 2);
  return status->substr(start, status->find('\n', start) - start);
}

/// Runs `fn` in a grandchild and returns how it ended.
template <class F>
castellan::platform::exit_status in_grandchild(F fn) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  castellan::platform::exit_status out;
  out.signaled = WIFSIGNALED(st);
  out.signal = out.signaled ? WTERMSIG(st) : 0;
  out.code = out.signaled ? 0 : WEXITSTATUS(st);
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(seccomp_tests)

BOOST_AUTO_TEST_CASE(anti_escape_set_denies_and_the_rest_works) {
  auto body = []() -> std::string {
    auto report = apply_seccomp({});
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
    if (status_line("Seccomp") != "2")
      err += "Seccomp: " + status_line("Seccomp") + "\n";
    if (status_line("NoNewPrivs") != "1")
      err += "NoNewPrivs: " + status_line("NoNewPrivs") + "\n";
    if (!report->enforced || report->mode != "filter" || !report->no_new_privs)
      err += "report says not enforced\n";
    err += expect_errno("ptrace(TRACEME)", ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr), EPERM);
    err += expect_errno("mount", ::mount("none", "/mnt", "tmpfs", 0, nullptr), EPERM);
    err += expect_errno("umount2", ::umount2("/proc", MNT_DETACH), EPERM);
    err += expect_errno("unshare(CLONE_NEWUSER)", ::unshare(CLONE_NEWUSER), EPERM);
    err += expect_errno("setns", ::setns(0, 0), EPERM);
    err += expect_errno("bpf", ::syscall(SYS_bpf, BPF_PROG_LOAD, nullptr, 0), EPERM);
    err += expect_errno("keyctl", ::syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, 0, 0), EPERM);
    err += expect_errno("add_key", ::syscall(SYS_add_key, "user", "x", "y", 1, 0), EPERM);
    err += expect_errno("perf_event_open", ::syscall(SYS_perf_event_open, nullptr, 0, -1, -1, 0),
                        EPERM);
    io_uring_params params{};
    err += expect_errno("io_uring_setup", ::syscall(SYS_io_uring_setup, 8, &params), EPERM);
    err += expect_errno("userfaultfd", ::syscall(SYS_userfaultfd, 0), EPERM);
    err += expect_errno("open_tree", ::syscall(SYS_open_tree, -100, "/", 0), EPERM);
    err += expect_errno("init_module", ::syscall(SYS_init_module, nullptr, 0, ""), EPERM);
    err += expect_errno("name_to_handle_at",
                        ::syscall(SYS_name_to_handle_at, -100, "/", nullptr, nullptr, 0), EPERM);
    err += expect_errno("process_vm_readv",
                        ::syscall(SYS_process_vm_readv, 1, nullptr, 0, nullptr, 0, 0), EPERM);
    // clone3 looks like an old kernel; clone with a namespace flag is denied.
    err += expect_errno("clone3", ::syscall(SYS_clone3, nullptr, 0), ENOSYS);
    err += expect_errno("clone(CLONE_NEWUSER)",
                        ::syscall(SYS_clone, CLONE_NEWUSER | SIGCHLD, nullptr, nullptr, nullptr, 0),
                        EPERM);
    err += expect_errno("clone(CLONE_NEWNET)",
                        ::syscall(SYS_clone, CLONE_NEWNET | SIGCHLD, nullptr, nullptr, nullptr, 0),
                        EPERM);
    // personality: the query and PER_LINUX only.
    err += expect_ok("personality(query)", ::personality(0xffffffff));
    err += expect_ok("personality(PER_LINUX)", ::personality(PER_LINUX));
    err += expect_errno("personality(ADDR_NO_RANDOMIZE)", ::personality(ADDR_NO_RANDOMIZE),
                        EPERM);
    // A system call newer than the filter's table: ENOSYS, not allowed.
    err += expect_errno("syscall 467 (newer than the table)", ::syscall(467, 0, 0, 0, 0), ENOSYS);
    // Everyday calls work; fork (clone without namespace flags) works.
    if (::getpid() <= 0)
      err += "getpid failed\n";
    utsname u;
    err += expect_ok("uname", ::uname(&u));
    auto st = in_grandchild([] { ::_exit(3); });
    if (st.signaled || st.code != 3)
      err += "fork: the child " + st.describe() + "\n";
    auto py = castellan::test::run_program({"/usr/bin/python3", "-c", "print(sum(range(10)))"});
    if (py.output != "45\n")
      err += "python3 under the filter printed: " + py.output + "\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(non_native_abis_kill_the_process) {
#if defined(__x86_64__)
  auto int80_getpid = [] {
    ::signal(SIGSEGV, SIG_DFL); // not the test framework's handler: die of it
    long ret = 20; // i386 getpid via int 0x80
    asm volatile("int $0x80" : "+a"(ret) : : "memory");
  };
  // Some kernels (and hypervisors) have no i386 entry at all: int 0x80 then
  // faults before any filter runs, and there is no i386 ABI to contain.
  const auto unfiltered = in_grandchild(int80_getpid);
  const bool have_i386 = !unfiltered.signaled && unfiltered.code == 0;
  if (!have_i386)
    BOOST_TEST_MESSAGE("the i386 ABI is not available here (int 0x80 without a filter: "
                       << unfiltered.describe() << "): only x32 is checked");
#endif
  auto body = [&]() -> std::string {
    auto report = apply_seccomp({});
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
#if defined(__x86_64__)
    auto x32 = in_grandchild([] { ::syscall(0x40000000 | 39); }); // x32 getpid
    if (!x32.signaled || x32.signal != SIGSYS)
      err += "x32 getpid: " + x32.describe() + "\n";
    if (have_i386) {
      auto i386 = in_grandchild(int80_getpid);
      if (!i386.signaled || i386.signal != SIGSYS)
        err += "int 0x80 getpid: " + i386.describe() + "\n";
    }
#else
    return "SKIP: non-native ABI probes are written for x86_64";
#endif
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(policy_denials_and_kills) {
  auto body = []() -> std::string {
    seccomp_spec spec;
    spec.deny = {"uname"};
    spec.kill = {"getppid", "ptrace"}; // kill wins over the anti-escape EPERM
    spec.deny_errno = EACCES;
    auto report = apply_seccomp(spec);
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
    utsname u;
    err += expect_errno("uname", ::uname(&u), EACCES);
    auto killed = in_grandchild([] { ::getppid(); });
    if (!killed.signaled || killed.signal != SIGSYS)
      err += "getppid: " + killed.describe() + "\n";
    auto traced = in_grandchild([] { ::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr); });
    if (!traced.signaled || traced.signal != SIGSYS)
      err += "ptrace: " + traced.describe() + "\n";
    bool listed = false;
    for (const auto& k : report->killed)
      listed = listed || k == "ptrace";
    if (!listed)
      err += "report does not list ptrace as killed\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

// The kernel reads pids, ioctl requests and fcntl commands as 32-bit ints:
// a value with high bits set must meet the same rule as its low 32 bits.
BOOST_AUTO_TEST_CASE(arguments_are_compared_as_the_kernel_reads_them) {
  auto body = []() -> std::string {
    seccomp_spec spec;
    auto report = apply_seccomp(spec);
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
    const long high = 1L << 32;
    rlimit lim{4096, 4096};
    for (long pid : {1L, high | 1L, high | 2L, high | 3L, static_cast<long>(0xffffffff00000001)})
      err += expect_errno(("prlimit64 pid " + std::to_string(pid)).c_str(),
                          static_cast<int>(::syscall(SYS_prlimit64, pid, RLIMIT_FSIZE, &lim,
                                                     nullptr)),
                          EPERM);
    err += expect_errno("setpriority who 1|high",
                        static_cast<int>(::syscall(SYS_setpriority, PRIO_PROCESS, high | 1L, 5)),
                        EPERM);
    err += expect_errno("setpriority PRIO_PGRP|high",
                        static_cast<int>(::syscall(SYS_setpriority, high | PRIO_PGRP, 0L, 5)),
                        EPERM);
    char c = 'x';
    err += expect_errno("ioctl TIOCSTI|high",
                        static_cast<int>(::syscall(SYS_ioctl, 0, high | TIOCSTI, &c)), EPERM);
    err += expect_errno("fcntl F_NOTIFY|high",
                        static_cast<int>(::syscall(SYS_fcntl, 0, high | F_NOTIFY, 0L)), EPERM);
    // The caller's own, by 0: allowed.
    if (::syscall(SYS_prlimit64, 0L, RLIMIT_FSIZE, nullptr, &lim) != 0)
      err += "prlimit64 of the caller: " + castellan::test::err_text(errno) + "\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

// fadvise DONTNEED is answered without being made: a page of the host's
// page cache stays where it is (mincore, on a file of this test's own).
BOOST_AUTO_TEST_CASE(fadvise_dontneed_evicts_nothing) {
  auto body = []() -> std::string {
    char path[] = "/var/tmp/castellan-fadvise-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0)
      return "mkstemp: " + castellan::test::err_text(errno);
    ::unlink(path);
    std::string page(4096, 'x');
    if (::write(fd, page.data(), page.size()) != 4096 || ::fsync(fd) != 0)
      return "write: " + castellan::test::err_text(errno);
    void* map = ::mmap(nullptr, 4096, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
      return "mmap: " + castellan::test::err_text(errno);
    auto cached = [&] {
      unsigned char vec = 0;
      return ::mincore(map, 4096, &vec) == 0 && (vec & 1) != 0;
    };
    char buf[4096];
    if (::pread(fd, buf, sizeof buf, 0) != 4096 || !cached())
      return "the page is not cached after a read";
    seccomp_spec spec;
    if (auto report = apply_seccomp(spec); !report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
    if (int rc = ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED); rc != 0)
      err += "fadvise answered " + castellan::test::err_text(rc) + "\n";
    if (!cached())
      err += "the page was evicted\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(unknown_names_and_bad_errno_are_errors) {
  auto body = []() -> std::string {
    seccomp_spec spec;
    spec.deny = {"no_such_syscall"};
    auto r = apply_seccomp(spec);
    if (r)
      return "an unknown syscall name was accepted";
    if (r.error().message.find("no_such_syscall") == std::string::npos)
      return "error does not name the syscall: " + r.error().describe();
    spec.deny.clear();
    spec.deny_errno = 0;
    if (apply_seccomp(spec))
      return "deny_errno 0 was accepted";
    if (status_line("Seccomp") != "0")
      return "a failed apply left a filter behind";
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(compiled_ahead_and_loaded_later_denies_the_same) {
  // The pool compiles once and every worker only loads: the loaded program
  // must deny exactly what the one compiled in place denies.
  seccomp_spec spec;
  spec.deny = {"uname"};
  spec.kill = {"getppid"};
  spec.deny_errno = EACCES;
  auto compiled = compile_seccomp(spec);
  BOOST_REQUIRE_MESSAGE(compiled, (compiled ? "" : compiled.error().describe()));
  BOOST_TEST(!compiled->rules.empty());
  BOOST_TEST(!compiled->guard.empty());
  BOOST_TEST(!compiled->report.enforced); // nothing is loaded yet
  // Compiling changes nothing in this process.
  BOOST_TEST(status_line("Seccomp") == "0");
  auto body = [&]() -> std::string {
    auto report = load_seccomp(*compiled);
    if (!report)
      return "load_seccomp: " + report.error().describe();
    std::string err;
    if (status_line("Seccomp") != "2" || status_line("NoNewPrivs") != "1")
      err += "Seccomp/NoNewPrivs not set after loading\n";
    if (!report->enforced || !report->no_new_privs || report->denied != compiled->report.denied)
      err += "the loaded report differs from the compiled one\n";
    utsname u;
    err += expect_errno("uname", ::uname(&u), EACCES);
    // The anti-escape set answers with the spec's errno too.
    err += expect_errno("unshare(CLONE_NEWUSER)", ::unshare(CLONE_NEWUSER), EACCES);
    err += expect_errno("syscall 467 (newer than the table)", ::syscall(467, 0, 0, 0, 0), ENOSYS);
    auto killed = in_grandchild([] { ::getppid(); });
    if (!killed.signaled || killed.signal != SIGSYS)
      err += "getppid: " + killed.describe() + "\n";
    if (::getpid() <= 0)
      err += "getpid failed\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(spec_with_compiled_filter_loads_it) {
  seccomp_spec spec;
  spec.deny = {"uname"};
  auto compiled = compile_seccomp(spec);
  BOOST_REQUIRE(compiled);
  // apply_seccomp prefers the compiled programs: a spec whose names say
  // nothing but whose compiled form denies uname must deny uname.
  seccomp_spec carrier;
  carrier.compiled = std::make_shared<const compiled_seccomp>(*compiled);
  auto body = [&]() -> std::string {
    auto report = apply_seccomp(carrier);
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    utsname u;
    return expect_errno("uname", ::uname(&u), EPERM);
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(a_program_the_kernel_refuses_is_an_error) {
  compiled_seccomp bad;
  bad.rules = {{0xffff, 0, 0, 0}}; // not a BPF opcode
  bad.guard = {{BPF_RET | BPF_K, 0, 0, SECCOMP_RET_ALLOW}};
  auto body = [&]() -> std::string {
    auto r = load_seccomp(bad);
    if (r)
      return "an invalid program was loaded";
    if (r.error().message.find("rules filter") == std::string::npos)
      return "error does not name the program: " + r.error().describe();
    compiled_seccomp empty;
    if (load_seccomp(empty))
      return "empty programs were accepted";
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_SUITE_END()
