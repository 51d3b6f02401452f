/// Network rules: CIDR and port parsing, address families, host lists.

#include <boost/test/unit_test.hpp>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/policy/engine/ports.hpp"
#include "policy_test_support.hpp"

using namespace castellan::policy;
using castellan::policy::test::from_text;

namespace {

struct net_case {
  net_proto proto;
  const char* address;
  uint16_t port;
  const char* host;
  action expected;
  const char* pointer;
};

void run(const castellan::policy::test::evaluators& p, const net_case& c) {
  const auto d = p.net(c.proto, c.address, c.port, c.host);
  BOOST_CHECK_MESSAGE(d.verdict == c.expected && d.pointer == c.pointer,
                      to_string(c.proto)
                          << " " << c.address << ":" << c.port << " '" << c.host << "': got " << d
                          << ", want " << to_string(c.expected) << " by " << c.pointer);
}

constexpr auto tcp = net_proto::tcp;
constexpr auto udp = net_proto::udp;

} // namespace

BOOST_AUTO_TEST_SUITE(net_matching)

// The reference's CIDR examples and what each one covers.
BOOST_AUTO_TEST_CASE(reference_cidr_examples) {
  struct cidr_case {
    const char* cidr;
    const char* inside;
    const char* outside;
  };
  const cidr_case cases[] = {
      {"0.0.0.0/0", "203.0.113.7", "2001:db8::1"},
      {"10.0.0.0/8", "10.255.0.1", "11.0.0.1"},
      {"172.16.0.0/12", "172.31.255.255", "172.32.0.0"},
      {"192.168.0.0/16", "192.168.1.1", "192.169.0.1"},
      {"169.254.169.254/32", "169.254.169.254", "169.254.169.253"},
      {"2001:db8::/32", "2001:db8:ffff::1", "2001:db9::1"},
      {"fe80::/10", "febf::1", "fec0::1"},
      {"::1/128", "::1", "::2"},
      {"::/0", "2001:db8::1", "1.2.3.4"},
  };
  for (const auto& c : cases) {
    auto block = parse_cidr(c.cidr);
    BOOST_REQUIRE_MESSAGE(block.has_value(), c.cidr);
    BOOST_CHECK_MESSAGE(block->contains(*parse_ip(c.inside)), c.cidr << " contains " << c.inside);
    BOOST_CHECK_MESSAGE(!block->contains(*parse_ip(c.outside)),
                        c.cidr << " excludes " << c.outside);
  }
}

BOOST_AUTO_TEST_CASE(cidr_validation) {
  const char* valid[] = {"0.0.0.0/0",     "1.2.3.4/32",          "1.2.3.4",          "::/0",
                         "2001:db8::/32", "::ffff:10.0.0.0/104", "fd00:ec2::254/128"};
  for (const char* v : valid)
    BOOST_CHECK_MESSAGE(parse_cidr(v).has_value(), v);
  const std::pair<const char*, const char*> invalid[] = {
      {"10.0.0.1/8", "host bits set beyond /8 (the network is 10.0.0.0/8)"},
      {"10.0.0.0/33", "exceeds 32"},
      {"2001:db8::/129", "exceeds 128"},
      {"2001:db8::1/32", "the network is 2001:db8::/32"},
      {"10.0.0.0/", "prefix length must be"},
      {"10.0.0.0/08", "leading zero"},
      {"10.0.0.0/-1", "not a number"},
      {"256.0.0.0/8", "not an IPv4 or IPv6 address"},
      {"010.0.0.0/8", "not an IPv4 or IPv6 address"},
      {"fe80::1%eth0/64", "not an IPv4 or IPv6 address"},
      {"/8", "missing address"},
      {"example.com/8", "not an IPv4 or IPv6 address"},
  };
  for (const auto& [text, fragment] : invalid) {
    auto r = parse_cidr(text);
    BOOST_REQUIRE_MESSAGE(!r.has_value(), text << " should be invalid");
    BOOST_CHECK_MESSAGE(r.error().message.find(fragment) != std::string::npos,
                        text << ": '" << r.error().message << "' lacks '" << fragment << "'");
  }
  // A block inside ::ffff:0:0/96 is the IPv4 block it maps.
  auto mapped = parse_cidr("::ffff:10.0.0.0/104");
  BOOST_REQUIRE(mapped.has_value());
  BOOST_CHECK_EQUAL(to_string(*mapped), "10.0.0.0/8");
}

// The reference's port specification examples.
BOOST_AUTO_TEST_CASE(reference_port_examples) {
  struct port_case {
    const char* spec;
    std::vector<uint16_t> in;
    std::vector<uint16_t> out;
  };
  const port_case cases[] = {
      {"80", {80}, {79, 81, 443}},
      {"80,443,8080", {80, 443, 8080}, {81, 8081}},
      {"8000-9000", {8000, 8500, 9000}, {7999, 9001}},
      {"80,443,8000-9000", {80, 443, 8000, 9000}, {81, 7999, 9001}},
      {"0-65535", {0, 1, 65535}, {}},
      {"0", {0}, {1}},
      {"65535", {65535}, {65534}},
  };
  for (const auto& c : cases) {
    auto r = parse_port_spec(c.spec);
    BOOST_REQUIRE_MESSAGE(r.has_value(), c.spec);
    for (auto p : c.in)
      BOOST_CHECK_MESSAGE(ports_contain(*r, p), c.spec << " contains " << p);
    for (auto p : c.out)
      BOOST_CHECK_MESSAGE(!ports_contain(*r, p), c.spec << " excludes " << p);
  }
  const std::pair<const char*, const char*> invalid[] = {
      {"", "empty"},
      {"65536", "out of range"},
      {"99999", "out of range"},
      {"123456", "out of range"},
      {"9000-8000", "from > to"},
      {"80,", "empty element"},
      {",80", "empty element"},
      {"80-", "empty port"},
      {"-80", "empty port"},
      {"80 ", "unexpected character ' '"},
      {"+80", "unexpected character '+'"},
      {"080", "leading zero"},
      {"1-2-3", "unexpected character '-'"},
  };
  for (const auto& [text, fragment] : invalid) {
    auto r = parse_port_spec(text);
    BOOST_REQUIRE_MESSAGE(!r.has_value(), "'" << text << "' should be invalid");
    BOOST_CHECK_MESSAGE(r.error().message.find(fragment) != std::string::npos,
                        text << ": '" << r.error().message << "' lacks '" << fragment << "'");
  }
}

BOOST_AUTO_TEST_CASE(rules_by_proto_family_and_port) {
  auto p = from_text(R"({"version": 1, "defaults": {"net": "allow"}, "net": {"rules": [
    {"action": "deny", "proto": "tcp", "cidr": "10.0.0.0/8", "ports": "0-65535"},
    {"action": "warn", "proto": "tcp", "cidr": "0.0.0.0/0", "ports": "25,3306"},
    {"action": "allow", "proto": "udp", "cidr": "10.1.0.0/16", "ports": "53"},
    {"action": "deny", "proto": "tcp", "cidr": "2001:db8::/32", "ports": "443"},
    {"action": "warn", "proto": "tcp", "cidr": "10.1.2.3/32", "ports": "25"}
  ]}})");
  const net_case cases[] = {
      {tcp, "10.1.2.3", 80, "", action::deny, "/net/rules/0"},
      {tcp, "10.1.2.3", 25, "", action::deny, "/net/rules/0"},
      {udp, "10.1.2.3", 53, "", action::allow, "/net/rules/2"},
      {udp, "10.1.2.3", 54, "", action::allow, "default"},
      {tcp, "8.8.8.8", 25, "", action::warn, "/net/rules/1"},
      {tcp, "8.8.8.8", 3306, "", action::warn, "/net/rules/1"},
      {tcp, "8.8.8.8", 26, "", action::allow, "default"},
      {tcp, "2001:db8::5", 443, "", action::deny, "/net/rules/3"},
      {tcp, "2001:db8::5", 80, "", action::allow, "default"},
      {udp, "2001:db8::5", 443, "", action::allow, "default"},
      // IPv4-mapped IPv6 addresses are their IPv4 address.
      {tcp, "::ffff:10.0.0.1", 80, "", action::deny, "/net/rules/0"},
      {tcp, "::ffff:8.8.8.8", 25, "", action::warn, "/net/rules/1"},
  };
  for (const auto& c : cases)
    run(p, c);
  const auto bad = p.net(tcp, "not-an-address", 80);
  BOOST_CHECK_EQUAL(bad.verdict, action::deny);
  BOOST_CHECK_EQUAL(bad.pointer, "invalid");
}

BOOST_AUTO_TEST_CASE(host_patterns) {
  BOOST_CHECK(!check_host_pattern("example.com"));
  BOOST_CHECK(!check_host_pattern("*.github.com"));
  BOOST_CHECK(!check_host_pattern("*"));
  BOOST_CHECK(!check_host_pattern("EXAMPLE.com."));
  BOOST_CHECK(!check_host_pattern("_dmarc.example.com"));
  BOOST_CHECK(check_host_pattern("*example.com"));
  BOOST_CHECK(check_host_pattern("a.*.com"));
  BOOST_CHECK(check_host_pattern("*."));
  BOOST_CHECK(check_host_pattern("a..b"));
  BOOST_CHECK(check_host_pattern(".a.b"));
  BOOST_CHECK(check_host_pattern("-a.b"));
  BOOST_CHECK(check_host_pattern(std::string(64, 'a') + ".com"));
  BOOST_CHECK(host_matches("*.github.com", "api.github.com"));
  BOOST_CHECK(host_matches("*.github.com", "a.b.github.com"));
  BOOST_CHECK(!host_matches("*.github.com", "github.com"));
  BOOST_CHECK(!host_matches("*.github.com", "evilgithub.com"));
  BOOST_CHECK(host_matches("example.com", "example.com"));
  BOOST_CHECK(!host_matches("example.com", "www.example.com"));
  BOOST_CHECK_EQUAL(normalize_host("Api.GitHub.com."), "api.github.com");
}

BOOST_AUTO_TEST_CASE(host_lists) {
  auto p = from_text(R"({"version": 1, "defaults": {"net": "deny"},
    "net": {
      "rules": [
        {"action": "deny", "proto": "tcp", "cidr": "10.0.0.0/8", "ports": "0-65535"},
        {"action": "allow", "proto": "tcp", "cidr": "192.0.2.0/24", "ports": "443"}
      ],
      "hosts": {
        "allow": ["pypi.org", "*.github.com", "files.pythonhosted.org"],
        "deny": ["evil.github.com", "*.internal.github.com"]
      }}})");
  const net_case cases[] = {
      {tcp, "140.82.1.1", 443, "api.github.com", action::allow, "/net/hosts/allow/1"},
      {tcp, "140.82.1.1", 443, "API.GitHub.com.", action::allow, "/net/hosts/allow/1"},
      {tcp, "151.101.0.1", 443, "pypi.org", action::allow, "/net/hosts/allow/0"},
      // The deny list wins over the allow list.
      {tcp, "140.82.1.1", 443, "evil.github.com", action::deny, "/net/hosts/deny/0"},
      {tcp, "140.82.1.1", 443, "a.internal.github.com", action::deny, "/net/hosts/deny/1"},
      // An allow list exists: hosts not on it are denied, even where a rule allows.
      {tcp, "192.0.2.1", 443, "example.com", action::deny, "/net/hosts/allow"},
      {tcp, "140.82.1.1", 443, "github.com", action::deny, "/net/hosts/allow"},
      // No host name at all: not on the allow list either.
      {tcp, "192.0.2.1", 443, "", action::deny, "/net/hosts/allow"},
      // Address rules still apply to allowed names (a name resolving inside).
      {tcp, "10.0.0.5", 443, "pypi.org", action::deny, "/net/rules/0"},
  };
  for (const auto& c : cases)
    run(p, c);
}

BOOST_AUTO_TEST_CASE(host_deny_without_allow_list) {
  auto p = from_text(R"({"version": 1, "defaults": {"net": "allow"},
    "net": {"hosts": {"deny": ["*"]}}})");
  run(p, {tcp, "1.2.3.4", 80, "anything.example", action::deny, "/net/hosts/deny/0"});
  run(p, {tcp, "1.2.3.4", 80, "", action::allow, "default"});
  auto q = from_text(R"({"version": 1, "defaults": {"net": "allow"},
    "net": {"hosts": {"deny": ["tracker.example"]}}})");
  run(q, {tcp, "1.2.3.4", 80, "tracker.example", action::deny, "/net/hosts/deny/0"});
  run(q, {tcp, "1.2.3.4", 80, "other.example", action::allow, "default"});
  // An empty allow list denies every connection.
  auto r = from_text(R"({"version": 1, "defaults": {"net": "allow"},
    "net": {"hosts": {"allow": []}}})");
  run(r, {tcp, "1.2.3.4", 80, "x.example", action::deny, "/net/hosts/allow"});
}

BOOST_AUTO_TEST_SUITE_END()
