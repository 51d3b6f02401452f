#include <boost/test/unit_test.hpp>

#include "actors/proxy/destination_check.hpp"
#include "actors/proxy/special_ranges.hpp"
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

BOOST_AUTO_TEST_CASE(every_ipv6_range_that_carries_ipv4_needs_an_explicit_rule) {
  auto p = policy_from(open_policy);
  // The default allows and 0.0.0.0/0 covers every IPv4 address they carry,
  // yet none of these is reached without a rule inside its own range.
  const std::vector<std::pair<const char*, const char*>> cases{
    {"::7f00:1", "IPv4-compatible"},              // ::127.0.0.1
    {"::808:808", "IPv4-compatible"},             // ::8.8.8.8
    {"::ffff:0:7f00:1", "IPv4-translated"},       // ::ffff:0:127.0.0.1
    {"64:ff9b::7f00:1", "NAT64 (64:ff9b::/96)"},  // 127.0.0.1
    {"64:ff9b::808:808", "NAT64 (64:ff9b::/96)"}, // 8.8.8.8
    {"64:ff9b:1::808:808", "local-use NAT64"},
    {"64:1::1", "translation (64::/16)"},
    {"2002:7f00:1::1", "6to4"},
    {"2002:808:808::1", "6to4"},
    {"2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo"},
    {"2001:db8::1", "documentation"},
    {"100::1", "discard-only"},
    {"fec0::1", "site-local"},
    {"ff02::1", "multicast"},
    {"::", "unspecified"},
    {"::1", "loopback (::1)"},
  };
  for (const auto& [a, name] : cases) {
    auto v = check_destination(*p, "www.example.com", 80, {ip(a)});
    BOOST_TEST(policy::to_string(v.verdict) == "deny", a);
    BOOST_TEST(v.rule == "special-range", a);
    BOOST_TEST(v.reason.find(name) != std::string::npos, a << ": " << v.reason);
    BOOST_TEST(v.allowed.empty(), a);
  }
  // Public IPv6 stays open under the same policy.
  BOOST_TEST(policy::to_string(
               check_destination(*p, "www.example.com", 80, {ip("2a00:1450:4001::1")}).verdict) ==
             "allow");
}

BOOST_AUTO_TEST_CASE(a_mapped_address_is_decided_as_the_ipv4_address) {
  auto p = policy_from(open_policy);
  // Built byte by byte: a resolver (or a caller) that hands over ::ffff:a.b.c.d
  // unnormalised gets the IPv4 verdict, and the proxy connects over IPv4.
  auto mapped = [](uint8_t a, uint8_t b, uint8_t c, uint8_t d) {
    policy::ip_address x;
    x.family = policy::ip_family::v6;
    x.bytes = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
    return x;
  };
  auto lo = check_destination(*p, "www.example.com", 80, {mapped(127, 0, 0, 1)});
  BOOST_TEST(lo.rule == "special-range");
  BOOST_TEST(lo.address == "127.0.0.1");
  BOOST_TEST(lo.reason.find("loopback (127.0.0.0/8)") != std::string::npos, lo.reason);
  auto meta = check_destination(*p, "www.example.com", 80, {mapped(169, 254, 169, 254)});
  BOOST_TEST(meta.reason.find("metadata") != std::string::npos, meta.reason);
  auto pub = check_destination(*p, "www.example.com", 80, {mapped(1, 2, 3, 4)});
  BOOST_TEST(policy::to_string(pub.verdict) == "allow");
  BOOST_REQUIRE(pub.allowed.size() == 1u);
  BOOST_TEST((pub.allowed[0] == ip("1.2.3.4")));
  BOOST_TEST((pub.allowed[0].family == policy::ip_family::v4));
  // The explicit IPv4 rule opens the mapped form of its address, no more.
  BOOST_TEST(check_destination(*p, "127.0.0.2", 8000, {mapped(127, 0, 0, 2)}).rule ==
             "/net/rules/1");
  BOOST_TEST(check_destination(*p, "127.0.0.2", 8000, {mapped(127, 0, 0, 3)}).rule ==
             "special-range");
}

BOOST_AUTO_TEST_CASE(an_explicit_rule_for_an_embedding_range_still_applies_the_ipv4_rules) {
  auto p = policy_from(R"({
    "version": 1,
    "defaults": { "net": "allow" },
    "net": { "rules": [
      { "action": "allow", "proto": "tcp", "cidr": "0.0.0.0/0", "ports": "0-65535" },
      { "action": "deny", "proto": "tcp", "cidr": "9.9.9.0/24", "ports": "0-65535" },
      { "action": "warn", "proto": "tcp", "cidr": "93.184.216.0/24", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "64:ff9b::/96", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "2002::/16", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "2001::/32", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "::/96", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "::ffff:0:0:0/96", "ports": "0-65535" },
      { "action": "allow", "proto": "tcp", "cidr": "64:ff9b:1::/48", "ports": "443" }
    ] }
  })");
  auto verdict = [&](const char* a, uint16_t port = 80) {
    return check_destination(*p, "x.test", port, {ip(a)});
  };
  // Public IPv4 inside: the range's rule decides.
  BOOST_TEST(verdict("64:ff9b::808:808").rule == "/net/rules/3");
  BOOST_TEST(policy::to_string(verdict("64:ff9b::808:808").verdict) == "allow");
  BOOST_TEST(verdict("2002:808:808::1").rule == "/net/rules/4");
  BOOST_TEST(verdict("::808:808").rule == "/net/rules/6");
  BOOST_TEST(verdict("::ffff:0:808:808").rule == "/net/rules/7");
  // Teredo: server 65.54.227.120, client 192.0.2.45 (stored inverted).
  BOOST_TEST(verdict("2001:0:4136:e378:8000:63bf:3fff:fdd2").rule == "/net/rules/5");
  // An IPv4 special range or deny rule inside: denied, and the reason says
  // which IPv4 address and why.
  for (const char* a : {"64:ff9b::7f00:1", "64:ff9b::a00:1", "2002:7f00:1::1", "::7f00:1",
                        "::ffff:0:7f00:1", "2001:0:4136:e378:8000:63bf:80ff:fffe"}) {
    auto v = verdict(a);
    BOOST_TEST(policy::to_string(v.verdict) == "deny", a);
    BOOST_TEST(v.rule == "special-range", a);
    BOOST_TEST(v.reason.find("carries") != std::string::npos, a << ": " << v.reason);
  }
  auto metadata = verdict("2002:a9fe:a9fe::1");
  BOOST_TEST(metadata.reason.find("169.254.169.254") != std::string::npos, metadata.reason);
  BOOST_TEST(metadata.reason.find("metadata") != std::string::npos, metadata.reason);
  auto teredo_server = verdict("2001:0:7f00:1:8000:63bf:3fff:fdd2"); // server 127.0.0.1
  BOOST_TEST(teredo_server.reason.find("127.0.0.1") != std::string::npos, teredo_server.reason);
  auto denied = verdict("64:ff9b::909:909");
  BOOST_TEST(denied.rule == "/net/rules/1");
  BOOST_TEST(denied.reason.find("9.9.9.9") != std::string::npos, denied.reason);
  auto warned = verdict("64:ff9b::5db8:d822"); // 93.184.216.34
  BOOST_TEST(policy::to_string(warned.verdict) == "warn");
  BOOST_TEST(warned.rule == "/net/rules/2");
  // Local-use NAT64 places the IPv4 address where its operator's prefix
  // length says: not decoded, its explicit rule alone decides (port 443 only).
  BOOST_TEST(verdict("64:ff9b:1::7f00:1", 443).rule == "/net/rules/8");
  BOOST_TEST(verdict("64:ff9b:1::7f00:1", 80).rule == "special-range");
}

BOOST_AUTO_TEST_CASE(an_isatap_identifier_carries_ipv4_in_any_prefix) {
  auto p = policy_from(open_policy);
  for (const char* a : {"2a00:1450::200:5efe:7f00:1", "2a00:1450::5efe:a9fe:a9fe"}) {
    auto v = check_destination(*p, "www.example.com", 80, {ip(a)});
    BOOST_TEST(v.rule == "special-range", a);
    BOOST_TEST(v.reason.find("carries") != std::string::npos, a << ": " << v.reason);
  }
  BOOST_TEST(policy::to_string(check_destination(*p, "www.example.com", 80,
                                                 {ip("2a00:1450::200:5efe:808:808")})
                                 .verdict) == "allow");
}

BOOST_AUTO_TEST_CASE(embedded_ipv4_is_read_where_each_range_puts_it) {
  auto v4s = [](const char* a) {
    std::vector<std::string> out;
    for (const auto& x : proxy::embedded_ipv4(ip(a)))
      out.push_back(policy::to_string(x));
    return out;
  };
  using v = std::vector<std::string>;
  BOOST_TEST(v4s("64:ff9b::c000:221") == (v{"192.0.2.33"}));
  BOOST_TEST(v4s("::c000:221") == (v{"192.0.2.33"}));
  BOOST_TEST(v4s("::ffff:0:c000:221") == (v{"192.0.2.33"}));
  BOOST_TEST(v4s("2002:c000:221::1") == (v{"192.0.2.33"}));
  BOOST_TEST(v4s("2001:0:4136:e378:8000:63bf:3fff:fdd2") == (v{"65.54.227.120", "192.0.2.45"}));
  BOOST_TEST(v4s("2a00::200:5efe:c000:221") == (v{"192.0.2.33"}));
  BOOST_TEST(v4s("64:ff9b:1::c000:221").empty());
  BOOST_TEST(v4s("2a00:1450::1").empty());
  BOOST_TEST(v4s("1.2.3.4").empty());
}

BOOST_AUTO_TEST_SUITE_END()
