/// The pre-built policies of policies/, each with a table of queries and the
/// decision (and deciding rule) expected of it, extends resolved.

#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "policy_test_support.hpp"

using namespace castellan::policy;
namespace t = castellan::policy::test;

namespace {

constexpr fs_access R = to_access(fs_perm::read_file);
constexpr fs_access W = to_access(fs_perm::write_file);
constexpr fs_access MK = to_access(fs_perm::make_reg);
constexpr auto tcp = net_proto::tcp;
constexpr auto udp = net_proto::udp;

/// One query of any domain and its expected answer.
struct expectation {
  char domain;        ///< 'f', 'n' or 'e'
  const char* target; ///< path or address
  fs_access access;   ///< fs
  net_proto proto;    ///< net
  uint16_t port;      ///< net
  const char* host;   ///< net
  action verdict;
  const char* pointer;
};

expectation fs(const char* path, fs_access a, action v, const char* ptr) {
  return {'f', path, a, tcp, 0, "", v, ptr};
}
expectation net(net_proto p, const char* addr, uint16_t port, action v, const char* ptr,
                const char* host = "") {
  return {'n', addr, 0, p, port, host, v, ptr};
}
expectation exe(const char* path, action v, const char* ptr) {
  return {'e', path, 0, tcp, 0, "", v, ptr};
}

void check_all(const std::string& name, const std::vector<expectation>& table) {
  auto p = t::prebuilt(name);
  for (const auto& x : table) {
    decision d;
    if (x.domain == 'f')
      d = p.fs(x.target, x.access);
    else if (x.domain == 'n')
      d = p.net(x.proto, x.target, x.port, x.host);
    else
      d = p.exec(x.target);
    BOOST_CHECK_MESSAGE(d.verdict == x.verdict && d.pointer == x.pointer,
                        name << ": " << x.domain << " " << x.target << ":" << x.port << " got " << d
                             << ", want " << to_string(x.verdict) << " by " << x.pointer);
  }
}

bool has(const std::vector<std::string>& v, const char* x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

} // namespace

BOOST_AUTO_TEST_SUITE(prebuilt_policies)

BOOST_AUTO_TEST_CASE(default_policy) {
  check_all("default",
            {
                fs("/usr/lib/python3.11/os.py", R, action::allow, "/fs/rules/0"),
                fs("/usr/bin/python3", to_access(fs_perm::execute), action::allow, "/fs/rules/0"),
                fs("/lib/x86_64-linux-gnu/libc.so.6", R, action::allow, "/fs/rules/1"),
                fs("/usr/lib/x", W, action::deny, "default"),
                fs("/etc/ld.so.cache", R, action::allow, "/fs/rules/3"),
                fs("/etc/python3.11/sitecustomize.py", R, action::allow, "/fs/rules/3"),
                // All of /etc: the sandbox's /etc holds no secrets (/etc/shadow
                // is not in it; explain says so, see sandbox_fs_rights.hpp).
                fs("/etc/passwd", R, action::allow, "/fs/rules/3"),
                fs("/etc/shadow", R, action::allow, "/fs/rules/3"),
                fs("/etc/passwd", W, action::deny, "default"),
                fs("/dev/shm/x", W, action::allow, "/fs/rules/4"),
                fs("/dev/zero", R, action::allow, "/fs/rules/5"),
                fs("/dev/null", W, action::allow, "/fs/rules/6"),
                fs("/tmp/x", W, action::allow, "/fs/rules/9"),
                fs("/tmp/new", MK, action::allow, "/fs/rules/9"),
                fs("/tmpfile", R, action::deny, "default"),
                fs("/home/user/.ssh/id_rsa", R, action::deny, "default"),
                net(tcp, "1.1.1.1", 443, action::deny, "default"),
                net(udp, "8.8.8.8", 53, action::deny, "default"),
                exe("/usr/bin/python3", action::allow, "/exec/rules/0"),
                exe("/usr/bin/python3.11", action::allow, "/exec/rules/1"),
                exe("/bin/sh", action::deny, "default"),
            });
  auto p = t::prebuilt("default");
  const auto& doc = p.compiled->document();
  BOOST_CHECK(has(doc.deny_syscalls, "ptrace"));
  BOOST_CHECK_EQUAL(*doc.limits.timeout_ms, 30000u);
}

BOOST_AUTO_TEST_CASE(networked_policy) {
  check_all("networked",
            {
                net(tcp, "1.1.1.1", 443, action::allow, "/net/rules/3"),
                net(udp, "8.8.8.8", 53, action::allow, "/net/rules/4"),
                net(tcp, "2001:db8::1", 443, action::allow, "/net/rules/5"),
                net(tcp, "169.254.169.254", 80, action::deny, "/net/rules/0"),
                net(tcp, "::ffff:169.254.169.254", 80, action::deny, "/net/rules/0"),
                net(tcp, "fd00:ec2::254", 80, action::deny, "/net/rules/2"),
                fs("/etc/resolv.conf", R, action::allow, "/fs/rules/3"),
                fs("/etc/ssl/certs/ca-certificates.crt", R, action::allow, "/fs/rules/3"),
                fs("/etc/passwd", W, action::deny, "default"),
                exe("/usr/bin/python3", action::allow, "/exec/rules/0"),
            });
}

BOOST_AUTO_TEST_CASE(no_network_policy) {
  check_all("no-network", {
                              net(tcp, "1.1.1.1", 443, action::deny, "/net/rules/0"),
                              net(udp, "8.8.8.8", 53, action::deny, "/net/rules/1"),
                              net(tcp, "::1", 80, action::deny, "/net/rules/2"),
                              net(udp, "2001:db8::1", 53, action::deny, "/net/rules/3"),
                              net(tcp, "1.1.1.1", 443, action::deny, "/net/rules/0", "example.com"),
                              fs("/usr/lib/x", R, action::allow, "/fs/rules/0"),
                              fs("/tmp/x", W, action::allow, "/fs/rules/9"),
                          });
}

BOOST_AUTO_TEST_CASE(readonly_policy) {
  check_all("readonly",
            {
                fs("/tmp/x", R, action::allow, "/fs/rules/9"),
                fs("/tmp/x", W, action::deny, "/fs/rules/10"),
                fs("/tmp/new", MK, action::deny, "/fs/rules/10"),
                fs("/tmp/x", to_access(fs_perm::truncate), action::deny, "/fs/rules/10"),
                fs("/dev/null", W, action::deny, "/fs/rules/10"),
                fs("/usr/lib/x", R, action::allow, "/fs/rules/0"),
                net(tcp, "1.1.1.1", 443, action::deny, "default"),
            });
}

BOOST_AUTO_TEST_CASE(strict_policy) {
  check_all("strict", {
                          fs("/tmp/x", W, action::deny, "/fs/rules/10"),
                          fs("/usr/lib/python3.11/os.py", R, action::allow, "/fs/rules/0"),
                          fs("/etc/passwd", R, action::allow, "/fs/rules/3"),
                          fs("/dev/shm/x", W, action::deny, "/fs/rules/10"),
                          net(tcp, "1.1.1.1", 443, action::deny, "/net/rules/0"),
                          exe("/usr/bin/python3", action::allow, "/exec/rules/0"),
                          exe("/bin/sh", action::deny, "default"),
                      });
  auto p = t::prebuilt("strict");
  const auto& doc = p.compiled->document();
  BOOST_CHECK(has(doc.deny_syscalls, "clone3"));
  BOOST_CHECK(has(doc.deny_syscalls, "ptrace"));
  BOOST_CHECK(doc.audit.enabled == true);
  BOOST_CHECK(has(doc.audit.events, "socket"));
  BOOST_CHECK_EQUAL(*doc.limits.timeout_ms, 5000u);
  BOOST_CHECK_EQUAL(*doc.limits.pids, 16u);
  BOOST_CHECK(doc.effective_net_default() == action::deny);
}

BOOST_AUTO_TEST_CASE(exec_policy) {
  check_all("exec-policy", {
                               exe("/usr/bin/python3", action::allow, "/exec/rules/0"),
                               exe("/usr/bin/python3.12", action::allow, "/exec/rules/1"),
                               exe("/bin/sh", action::deny, "default"),
                               exe("/usr/bin/perl", action::deny, "default"),
                               fs("/etc/passwd", R, action::allow, "default"),
                               net(tcp, "1.1.1.1", 443, action::allow, "default"),
                           });
}

BOOST_AUTO_TEST_CASE(fs_allowlist_policy) {
  check_all("fs-allowlist", {
                                fs("/tmp/out.txt", W, action::allow, "/fs/rules/0"),
                                fs("/app/handler.py", R, action::allow, "/fs/rules/1"),
                                fs("/app/handler.py", W, action::deny, "default"),
                                fs("/application", R, action::deny, "default"),
                                fs("/usr/lib/x", R, action::allow, "/fs/rules/2"),
                                fs("/etc/passwd", R, action::deny, "default"),
                                net(tcp, "1.1.1.1", 443, action::allow, "default"),
                                exe("/bin/sh", action::allow, "default"),
                            });
}

BOOST_AUTO_TEST_CASE(net_egress_policy) {
  check_all("net-egress", {
                              net(tcp, "169.254.169.254", 80, action::deny, "/net/rules/0"),
                              net(tcp, "169.254.169.254", 22, action::deny, "/net/rules/1"),
                              net(tcp, "10.1.1.1", 443, action::deny, "/net/rules/2"),
                              net(tcp, "172.20.0.1", 443, action::deny, "/net/rules/3"),
                              net(tcp, "172.32.0.1", 443, action::allow, "default"),
                              net(tcp, "192.168.1.1", 80, action::deny, "/net/rules/4"),
                              net(tcp, "8.8.8.8", 2222, action::warn, "/net/rules/5"),
                              net(tcp, "8.8.8.8", 25, action::warn, "/net/rules/6"),
                              net(tcp, "8.8.8.8", 3306, action::warn, "/net/rules/7"),
                              net(tcp, "8.8.8.8", 5432, action::warn, "/net/rules/8"),
                              net(tcp, "8.8.8.8", 6379, action::warn, "/net/rules/9"),
                              net(tcp, "10.0.0.1", 3306, action::deny, "/net/rules/2"),
                              net(tcp, "8.8.8.8", 443, action::allow, "default"),
                              net(udp, "10.0.0.1", 53, action::deny, "/net/rules/11"),
                              net(udp, "8.8.8.8", 53, action::allow, "default"),
                              net(tcp, "fd00:ec2::254", 80, action::deny, "/net/rules/14"),
                              net(tcp, "fd12::1", 443, action::deny, "/net/rules/15"),
                              net(tcp, "fe80::1", 443, action::deny, "/net/rules/16"),
                              net(tcp, "2606:4700::1111", 443, action::allow, "default"),
                              net(tcp, "::ffff:10.0.0.1", 80, action::deny, "/net/rules/2"),
                          });
}

BOOST_AUTO_TEST_CASE(anti_escape_policy) {
  check_all("anti-escape", {
                               fs("/etc/shadow", R, action::allow, "default"),
                               net(tcp, "10.0.0.1", 22, action::allow, "default"),
                               exe("/bin/sh", action::allow, "default"),
                           });
  auto p = t::prebuilt("anti-escape");
  const auto& s = p.compiled->document().deny_syscalls;
  BOOST_CHECK_EQUAL(s.size(), 13u);
  for (const char* name :
       {"ptrace", "mount", "umount2", "bpf", "kexec_load", "unshare", "setns", "clone3",
        "init_module", "finit_module", "perf_event_open", "keyctl", "add_key"})
    BOOST_CHECK_MESSAGE(has(s, name), name);
}

BOOST_AUTO_TEST_CASE(audit_policy) {
  check_all("audit", {
                         fs("/etc/shadow", R, action::allow, "default"),
                         net(tcp, "10.0.0.1", 22, action::allow, "default"),
                         exe("/bin/sh", action::allow, "default"),
                     });
  auto p = t::prebuilt("audit");
  const auto& a = p.compiled->document().audit;
  BOOST_CHECK(a.enabled == true);
  BOOST_CHECK((a.events == std::vector<std::string>{"connect", "openat", "execve"}));
}

BOOST_AUTO_TEST_CASE(lambda_backend_policy) {
  check_all("lambda-backend", {
                                  fs("/app/handler.py", R, action::allow, "/fs/rules/1"),
                                  fs("/app/handler.py", W, action::deny, "default"),
                                  fs("/tmp/out", W, action::allow, "/fs/rules/0"),
                                  fs("/etc/passwd", R, action::deny, "default"),
                                  net(tcp, "10.0.0.1", 443, action::deny, "/net/rules/2"),
                                  net(tcp, "93.184.216.34", 443, action::allow, "default"),
                                  net(tcp, "93.184.216.34", 5432, action::warn, "/net/rules/8"),
                                  exe("/usr/bin/python3", action::allow, "/exec/rules/0"),
                                  exe("/bin/sh", action::deny, "default"),
                              });
  auto p = t::prebuilt("lambda-backend");
  const auto& doc = p.compiled->document();
  BOOST_CHECK(doc.effective_fs_default() == action::deny);
  BOOST_CHECK(doc.effective_net_default() == action::allow);
  BOOST_CHECK(doc.effective_exec_default() == action::deny);
  BOOST_CHECK(has(doc.deny_syscalls, "clone3"));
  BOOST_CHECK_EQUAL(*doc.limits.timeout_ms, 15000u);
  BOOST_CHECK_EQUAL(doc.fs_rules[1].origin, t::policies_dir() + "/fs-allowlist.json#/fs/rules/1");
}

BOOST_AUTO_TEST_SUITE_END()
