// The seccomp filter against the real kernel, in forked children.

#include <boost/test/unit_test.hpp>

#include <linux/bpf.h>
#include <linux/io_uring.h>
#include <linux/keyctl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/personality.h>
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
  auto body = []() -> std::string {
    auto report = apply_seccomp({});
    if (!report)
      return "apply_seccomp: " + report.error().describe();
    std::string err;
#if defined(__x86_64__)
    auto x32 = in_grandchild([] { ::syscall(0x40000000 | 39); }); // x32 getpid
    if (!x32.signaled || x32.signal != SIGSYS)
      err += "x32 getpid: " + x32.describe() + "\n";
    auto i386 = in_grandchild([] {
      long ret = 20; // i386 getpid via int 0x80
      asm volatile("int $0x80" : "+a"(ret) : : "memory");
    });
    if (!i386.signaled || i386.signal != SIGSYS)
      err += "int 0x80 getpid: " + i386.describe() + "\n";
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

BOOST_AUTO_TEST_SUITE_END()
