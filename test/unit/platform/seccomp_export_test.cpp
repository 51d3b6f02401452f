// A filter exported as bytes and installed by a forked child on itself, on
// top of the filters it already has.

#include <boost/test/unit_test.hpp>

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "child_process.hpp"
#include "platform/linux/seccomp_export.hpp"
#include "platform/linux/seccomp_filter.hpp"
#include "sandbox_helpers.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::expect_errno;

namespace {

/// Installs `program` the way the harness does: no_new_privs, then
/// PR_SET_SECCOMP with the bytes as they came.
std::string install(const std::string& program) {
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return "prctl(PR_SET_NO_NEW_PRIVS) failed";
  sock_fprog prog{static_cast<unsigned short>(program.size() / sizeof(sock_filter)),
                  reinterpret_cast<sock_filter*>(const_cast<char*>(program.data()))};
  if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0) != 0)
    return std::string("prctl(PR_SET_SECCOMP): ") + std::strerror(errno);
  return "";
}

int killed_by(void (*fn)()) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    fn();
    ::_exit(0);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(seccomp_export_tests)

BOOST_AUTO_TEST_CASE(an_exported_filter_denies_and_kills_what_it_names) {
  auto filter = export_seccomp_filter({"uname", "getppid"}, {"getppid", "sethostname"}, EACCES);
  BOOST_REQUIRE_MESSAGE(filter, (filter ? "" : filter.error().describe()));
  BOOST_TEST(filter->program.size() % sizeof(sock_filter) == 0u);
  BOOST_TEST(filter->denied == std::vector<std::string>{"uname"});
  BOOST_TEST(filter->killed.size() == 2u); // getppid: kill wins over deny
  const std::string program = filter->program;
  auto body = [program]() -> std::string {
    if (auto err = install(program); !err.empty())
      return err;
    std::string err;
    utsname u;
    err += expect_errno("uname", ::uname(&u), EACCES);
    if (int sig = killed_by([] { ::getppid(); }); sig != SIGSYS)
      err += "getppid ended with signal " + std::to_string(sig) + ", not SIGSYS\n";
    if (::getpid() <= 0)
      err += "getpid does not work under the filter\n";
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(an_exported_filter_only_adds_to_the_filters_in_force) {
  // The worker's own filter denies ptrace; the extra one denies uname. Both
  // hold afterwards: the most restrictive answer of all filters wins.
  auto filter = export_seccomp_filter({"uname"}, {});
  BOOST_REQUIRE(filter);
  const std::string program = filter->program;
  auto body = [program]() -> std::string {
    seccomp_spec base;
    base.deny = {"getcwd"};
    if (auto r = apply_seccomp(base); !r)
      return "apply_seccomp: " + r.error().describe();
    if (auto err = install(program); !err.empty())
      return err;
    std::string err;
    utsname u;
    char buf[64];
    err += expect_errno("uname", ::uname(&u), EPERM);
    err += expect_errno("getcwd", ::getcwd(buf, sizeof buf) == nullptr ? -1 : 0, EPERM);
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(unknown_names_and_bad_errnos_are_refused) {
  auto r = export_seccomp_filter({"no_such_syscall"}, {});
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().message.find("no_such_syscall") != std::string::npos);
  BOOST_TEST(!export_seccomp_filter({"uname"}, {}, 0));
  // An empty filter is still a program (it allows everything).
  auto empty = export_seccomp_filter({}, {});
  BOOST_REQUIRE(empty);
  BOOST_TEST(!empty->program.empty());
}

BOOST_AUTO_TEST_SUITE_END()
