// Landlock against the real kernel: each restriction in a forked child.

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "child_process.hpp"
#include "platform/linux/landlock.hpp"
#include "sandbox_helpers.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::expect_errno;
using castellan::test::expect_ok;

namespace {

/// A TCP listener on 127.0.0.1, port chosen by the kernel.
struct listener {
  unique_fd fd;
  uint16_t port = 0;
};

listener listen_loopback() {
  listener l;
  l.fd.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  BOOST_REQUIRE(l.fd);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE_EQUAL(::bind(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  BOOST_REQUIRE_EQUAL(::listen(l.fd.get(), 4), 0);
  socklen_t len = sizeof addr;
  BOOST_REQUIRE_EQUAL(::getsockname(l.fd.get(), reinterpret_cast<sockaddr*>(&addr), &len), 0);
  l.port = ntohs(addr.sin_port);
  return l;
}

int connect_loopback(uint16_t port) {
  const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const int rc = ::connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  const int saved = errno;
  ::close(s);
  errno = saved;
  return rc;
}

/// Landlock that allows reading /usr and nothing else of the file system.
landlock_spec usr_only() {
  landlock_spec spec;
  spec.best_effort = false;
  spec.paths = {{"/usr", landlock_fs::read_execute, false}};
  spec.handled_net = 0;
  spec.scoped = 0;
  return spec;
}

} // namespace

BOOST_AUTO_TEST_SUITE(landlock_tests)

BOOST_AUTO_TEST_CASE(abi_is_reported_and_matches_the_kernel) {
  const int abi = landlock_abi();
  BOOST_TEST_MESSAGE("Landlock ABI of the running kernel: " << abi);
  if (abi == 0) {
    castellan::test::skip("the kernel has no Landlock (or it is not an active LSM)");
    return;
  }
  BOOST_TEST(landlock_fs_rights_of_abi(1) == (1ull << 13) - 1);
  BOOST_TEST(landlock_fs_rights_of_abi(3) == ((1ull << 15) - 1));
  BOOST_TEST(landlock_net_rights_of_abi(3) == 0u);
  BOOST_TEST(landlock_net_rights_of_abi(4) == landlock_net::all);
  BOOST_TEST(landlock_scopes_of_abi(5) == 0u);
  BOOST_TEST(landlock_scopes_of_abi(6) == landlock_scope::all);
}

BOOST_AUTO_TEST_CASE(paths_outside_the_rules_are_denied_though_mounts_allow_them) {
  // A file we may write by every other measure (owner, mode, a rw mount).
  char tmpl[] = "/tmp/castellan-landlock-XXXXXX";
  const int probe = ::mkstemp(tmpl);
  BOOST_REQUIRE(probe >= 0);
  ::close(probe);
  auto body = [&]() -> std::string {
    if (landlock_abi() < 1)
      return "SKIP: the kernel has no Landlock";
    if (::access(tmpl, W_OK) != 0)
      return "the probe file is not writable to begin with";
    auto report = apply_landlock(usr_only());
    if (!report)
      return "apply_landlock: " + report.error().describe();
    std::string err;
    if (!report->enforced || report->abi != landlock_abi())
      err += "report: not enforced or wrong ABI\n";
    if (report->handled_fs != landlock_fs_rights_of_abi(report->abi))
      err += "report: handled_fs is not every right of the ABI\n";
    if (report->path_rules != 1)
      err += "report: expected one path rule\n";
    err += expect_errno("open /etc/hostname", ::open("/etc/hostname", O_RDONLY), EACCES);
    err += expect_errno("open /tmp probe for writing", ::open(tmpl, O_WRONLY), EACCES);
    err += expect_errno("create in /tmp", ::open("/tmp/castellan-ll-new", O_CREAT | O_WRONLY, 0600),
                        EACCES);
    const int usr = ::open("/usr/bin/python3", O_RDONLY | O_CLOEXEC);
    err += expect_ok("read /usr/bin/python3", usr);
    if (usr >= 0)
      ::close(usr);
    // /usr is a writable mount for root here: only Landlock stands in the way.
    const int created = ::open("/usr/castellan-landlock-probe", O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    err += expect_errno("create under /usr", created, EACCES);
    if (created >= 0)
      ::unlink("/usr/castellan-landlock-probe");
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
  ::unlink(tmpl);
}

BOOST_AUTO_TEST_CASE(tcp_connect_needs_a_port_rule) {
  listener allowed = listen_loopback();
  listener other = listen_loopback();
  auto body = [&]() -> std::string {
    const int abi = landlock_abi();
    if (abi < 4)
      return "SKIP: Landlock ABI " + std::to_string(abi) + " has no TCP rules (needs 4)";
    landlock_spec spec;
    spec.best_effort = false;
    spec.handled_fs = 0;
    spec.handled_net = landlock_net::all;
    spec.ports = {{allowed.port, landlock_net::connect_tcp}};
    spec.scoped = 0;
    auto report = apply_landlock(spec);
    if (!report)
      return "apply_landlock: " + report.error().describe();
    std::string err;
    if (report->handled_net != landlock_net::all || report->port_rules != 1)
      err += "report: net rights or port rules wrong\n";
    err += expect_ok("connect to the allowed port", connect_loopback(allowed.port));
    err += expect_errno("connect to another port", connect_loopback(other.port), EACCES);
    // Binding is handled and has no rule: denied too.
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(other.port == 65535 ? 65534 : static_cast<uint16_t>(other.port + 1));
    err += expect_errno("bind", ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr),
                        EACCES);
    ::close(s);
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(abstract_unix_sockets_and_signals_stay_inside) {
  // An abstract socket outside the sandbox, and a process to signal.
  unique_fd server(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  BOOST_REQUIRE(server);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string name = "castellan-landlock-test-" + std::to_string(::getpid());
  std::memcpy(addr.sun_path + 1, name.data(), name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  BOOST_REQUIRE_EQUAL(::bind(server.get(), reinterpret_cast<sockaddr*>(&addr), len), 0);
  BOOST_REQUIRE_EQUAL(::listen(server.get(), 4), 0);
  const pid_t outside = ::getpid();
  auto body = [&]() -> std::string {
    const int abi = landlock_abi();
    if (abi < 6)
      return "SKIP: Landlock ABI " + std::to_string(abi) + " has no IPC scoping (needs 6)";
    auto try_connect = [&] {
      const int c = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int rc = ::connect(c, reinterpret_cast<const sockaddr*>(&addr), len);
      const int saved = errno;
      ::close(c);
      errno = saved;
      return rc;
    };
    std::string err = expect_ok("connect before scoping", try_connect());
    err += expect_ok("signal 0 before scoping", ::kill(outside, 0));
    landlock_spec spec;
    spec.best_effort = false;
    spec.handled_fs = 0;
    spec.handled_net = 0;
    spec.scoped = landlock_scope::all;
    auto report = apply_landlock(spec);
    if (!report)
      return "apply_landlock: " + report.error().describe();
    if (report->scoped != landlock_scope::all)
      err += "report: scopes not in force\n";
    err += expect_errno("connect to the outside abstract socket", try_connect(), EPERM);
    err += expect_errno("signal the outside process", ::kill(outside, 0), EPERM);
    err += expect_ok("signal itself", ::kill(::getpid(), 0));
    return err;
  };
  castellan::test::check(castellan::test::run_forked(body));
}

BOOST_AUTO_TEST_CASE(strict_mode_refuses_what_it_cannot_enforce) {
  landlock_spec spec;
  spec.handled_fs = 1ull << 40; // a right no ABI has
  auto body = [&]() -> std::string {
    auto r = apply_landlock(spec);
    if (r)
      return "an unknown right was accepted";
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body));
  // With best_effort off, every right of this ABI is accepted as is.
  auto body2 = []() -> std::string {
    const int abi = landlock_abi();
    if (abi < 1)
      return "SKIP: the kernel has no Landlock";
    landlock_spec strict;
    strict.best_effort = false;
    strict.handled_fs = landlock_fs_rights_of_abi(abi);
    strict.handled_net = landlock_net_rights_of_abi(abi);
    strict.scoped = landlock_scopes_of_abi(abi);
    strict.paths = {{"/", landlock_fs::read_execute, false}};
    auto r = apply_landlock(strict);
    if (!r)
      return "strict mode failed on its own ABI: " + r.error().describe();
    if (r->dropped_fs || r->dropped_net || r->dropped_scoped)
      return "something was dropped";
    // And a right beyond it is an error, not a silent drop, below ABI 5.
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body2));
  if (landlock_abi() >= 1 && landlock_abi() < 5) {
    auto body3 = []() -> std::string {
      landlock_spec s;
      s.best_effort = false;
      s.handled_fs = landlock_fs::all; // ioctl_dev needs ABI 5
      return apply_landlock(s) ? "accepted a right the ABI lacks" : "";
    };
    castellan::test::check(castellan::test::run_forked(body3));
  }
}

BOOST_AUTO_TEST_CASE(missing_optional_paths_are_reported_required_ones_fail) {
  auto body = []() -> std::string {
    if (landlock_abi() < 1)
      return "SKIP: the kernel has no Landlock";
    landlock_spec spec = usr_only();
    spec.paths.push_back({"/nonexistent/optional", landlock_fs::read_file, true});
    auto r = apply_landlock(spec);
    if (!r)
      return "apply_landlock: " + r.error().describe();
    if (r->skipped_paths != std::vector<std::string>{"/nonexistent/optional"})
      return "skipped path not reported";
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body));
  auto body2 = []() -> std::string {
    if (landlock_abi() < 1)
      return "SKIP: the kernel has no Landlock";
    landlock_spec spec = usr_only();
    spec.paths.push_back({"/nonexistent/required", landlock_fs::read_file, false});
    auto r = apply_landlock(spec);
    if (r)
      return "a missing required path was accepted";
    if (r.error().code != ENOENT ||
        r.error().message.find("/nonexistent/required") == std::string::npos)
      return "unexpected error: " + r.error().describe();
    return "";
  };
  castellan::test::check(castellan::test::run_forked(body2));
}

BOOST_AUTO_TEST_SUITE_END()
