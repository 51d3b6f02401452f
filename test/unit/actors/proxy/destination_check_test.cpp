#include <boost/test/unit_test.hpp>

#include "actors/proxy/destination_check.hpp"
#include "proxy_test_support.hpp"

using namespace castellan;
using proxy::check_destination;
using proxy::check_host_name;
using proxy::test::policy_from;

namespace {

policy::ip_address ip(const char* text) {
  auto a = policy::parse_ip(text);
  BOOST_REQUIRE(a);
  return *a;
}

constexpr const char* open_policy = R"({
  "version": 1,
  "defaults": { "net": "allow" },
  "net": {
    "rules": [
      { "action": "allow", "proto": "tcp", "cidr": "0.0.0.0/0", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "127.0.0.2/32", "ports": "8000" },
      { "action": "warn", "proto": "tcp", "cidr": "93.184.216.0/24", "ports": "0-65535" }
    ],
    "hosts": { "allow": ["*.example.com", "example.com", "localhost", "metadata.test", "127.0.0.2"],
               "deny": ["evil.example.com"] }
  }
})";

} // namespace

BOOST_AUTO_TEST_SUITE(proxy_destination)

BOOST_AUTO_TEST_CASE(an_allowed_name_on_a_public_address_is_allowed) {
  auto p = policy_from(open_policy);
  auto v = check_destination(*p, "www.example.com", 443, {ip("1.2.3.4"), ip("1.2.3.4")});
  BOOST_TEST(policy::to_string(v.verdict) == "allow");
  BOOST_TEST(v.rule == "/net/rules/0");
  BOOST_TEST(v.allowed.size() == 1u); // deduplicated
}

BOOST_AUTO_TEST_CASE(a_warn_rule_makes_the_verdict_warn) {
  auto p = policy_from(open_policy);
  auto v = check_destination(*p, "example.com", 80, {ip("1.2.3.4"), ip("93.184.216.34")});
  BOOST_TEST(policy::to_string(v.verdict) == "warn");
  BOOST_TEST(v.rule == "/net/rules/2");
  BOOST_TEST(v.address == "93.184.216.34");
  BOOST_TEST(v.allowed.size() == 2u);
}

BOOST_AUTO_TEST_CASE(loopback_and_metadata_need_an_explicit_rule_even_for_allowed_names) {
  auto p = policy_from(open_policy);
  // 0.0.0.0/0 and the host list allow it, but neither is explicit.
  auto v = check_destination(*p, "localhost", 80, {ip("127.0.0.1")});
  BOOST_TEST(policy::to_string(v.verdict) == "deny");
  BOOST_TEST(v.rule == "special-range");
  BOOST_TEST(v.reason.find("loopback") != std::string::npos, v.reason);
  auto m = check_destination(*p, "metadata.test", 80, {ip("169.254.169.254")});
  BOOST_TEST(m.rule == "special-range");
  BOOST_TEST(m.reason.find("metadata") != std::string::npos, m.reason);
  for (const char* a : {"10.1.2.3", "172.16.0.1", "192.168.1.1", "100.64.0.1", "0.0.0.0", "::1",
                        "fe80::1", "fd00::1", "::ffff:127.0.0.1", "64:ff9b::7f00:1", "224.0.0.1"}) {
    auto x = check_destination(*p, "www.example.com", 80, {ip(a)});
    BOOST_TEST(x.rule == "special-range", a);
  }
  // The explicit rule opens exactly its block and port.
  auto ok = check_destination(*p, "127.0.0.2", 8000, {ip("127.0.0.2")});
  BOOST_TEST(policy::to_string(ok.verdict) == "allow");
  BOOST_TEST(ok.rule == "/net/rules/1");
  BOOST_TEST(check_destination(*p, "127.0.0.2", 8001, {ip("127.0.0.2")}).rule == "special-range");
}

BOOST_AUTO_TEST_CASE(one_denied_address_denies_the_whole_name) {
  auto p = policy_from(open_policy);
  auto v = check_destination(*p, "www.example.com", 443, {ip("1.2.3.4"), ip("127.0.0.1")});
  BOOST_TEST(policy::to_string(v.verdict) == "deny");
  BOOST_TEST(v.address == "127.0.0.1");
  BOOST_TEST(v.allowed.empty());
}

BOOST_AUTO_TEST_CASE(host_lists_deny_before_any_resolution) {
  auto p = policy_from(open_policy);
  auto d = check_host_name(*p, "evil.example.com", 443);
  BOOST_REQUIRE(d);
  BOOST_TEST(d->rule == "/net/hosts/deny/0");
  BOOST_TEST(d->reason == "denied evil.example.com:443 by /net/hosts/deny/0");
  auto n = check_host_name(*p, "pypi.org", 443);
  BOOST_REQUIRE(n);
  BOOST_TEST(n->rule == "/net/hosts/allow");
  BOOST_TEST(!check_host_name(*p, "api.example.com", 443));
  // The full check agrees.
  BOOST_TEST(check_destination(*p, "evil.example.com", 443, {ip("1.2.3.4")}).rule ==
             "/net/hosts/deny/0");
}

BOOST_AUTO_TEST_CASE(a_deny_rule_names_itself) {
  auto p = policy_from(R"({"version": 1, "defaults": {"net": "allow"},
    "net": {"rules": [{"action": "deny", "proto": "tcp", "cidr": "1.2.3.0/24", "ports": "443"}]}})");
  auto v = check_destination(*p, "x.test", 443, {ip("1.2.3.4")});
  BOOST_TEST(v.rule == "/net/rules/0");
  BOOST_TEST(v.reason == "denied x.test:443 (1.2.3.4) by /net/rules/0");
  BOOST_TEST(check_destination(*p, "x.test", 443, {}).rule == "resolve");
}

BOOST_AUTO_TEST_SUITE_END()
