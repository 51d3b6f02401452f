/// The compiled engine agrees with the linear oracle, decision and deciding
/// rule, on thousands of random policies and queries.

#include <boost/test/unit_test.hpp>

#include <random>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/ip.hpp"
#include "policy_test_support.hpp"

using namespace castellan::policy;
namespace t = castellan::policy::test;

namespace {

class generator {
public:
  explicit generator(uint32_t seed) : rng_(seed) {}

  size_t below(size_t n) { return std::uniform_int_distribution<size_t>{0, n - 1}(rng_); }
  bool chance(unsigned percent) { return below(100) < percent; }
  template <class T, size_t N> const T& pick(const T (&arr)[N]) { return arr[below(N)]; }

  std::string action_name() {
    static const char* names[] = {"allow", "warn", "deny"};
    return pick(names);
  }

  std::string pattern() {
    static const char* literal[] = {"a", "b", "tmp", "lib", "x.py", "usr"};
    static const char* globbed[] = {"*", "*.py", "l*b", "**", "a*"};
    std::string out;
    const size_t depth = below(5);
    for (size_t i = 0; i < depth; ++i)
      out += std::string{"/"} + (chance(30) ? pick(globbed) : pick(literal));
    return out.empty() ? "/" : out;
  }

  std::string query_path() {
    static const char* parts[] = {"a",    "b",       "tmp", "lib", "x.py", "usr", "lab",
                                  "y.py", "tmpfile", "aa",  ".",   "..",   ""};
    std::string out;
    const size_t depth = below(7);
    for (size_t i = 0; i < depth; ++i)
      out += std::string{"/"} + pick(parts);
    return out.empty() ? "/" : out;
  }

  fs_access access() {
    fs_access m = 0;
    do
      m |= fs_access{1u} << below(4);
    while (chance(30));
    return m;
  }

  std::vector<std::string> perm_names() {
    std::vector<std::string> out;
    const fs_access m = access();
    for (unsigned bit = 0; bit < 4; ++bit)
      if (m & (1u << bit))
        out.emplace_back(fs_perm_name(bit));
    return out;
  }

  ip_address address(bool for_query) {
    static const char* v4[] = {"10.0.0.0", "10.1.2.3",   "192.168.1.77",   "8.8.8.8",
                               "0.0.0.0",  "172.16.5.4", "169.254.169.254"};
    static const char* v6[] = {"2001:db8::1", "fe80::1", "::1", "2001:db8:1::77"};
    ip_address a = *parse_ip(chance(80) ? pick(v4) : pick(v6));
    if (for_query && chance(50))
      a.bytes[a.size() - 1] = static_cast<uint8_t>(below(256));
    return a;
  }

  std::string cidr() {
    const ip_address a = address(false);
    const unsigned prefix = static_cast<unsigned>(below(a.bits() + 1));
    return to_string(mask_address(a, prefix)) + "/" + std::to_string(prefix);
  }

  std::string ports() {
    static const char* specs[] = {"0-65535",   "80", "443",         "80,443",
                                  "8000-9000", "53", "22,80-90,443"};
    return pick(specs);
  }

  std::string host(bool for_query) {
    static const char* patterns[] = {"a.com", "*.a.com", "b.a.com", "*", "c.org", "*.c.org"};
    static const char* queries[] = {"a.com", "b.a.com", "x.b.a.com", "A.COM.",
                                    "c.org", "d.c.org", "other.net", ""};
    return for_query ? pick(queries) : pick(patterns);
  }

  nlohmann::json policy() {
    nlohmann::json p;
    p["version"] = 1;
    p["defaults"] = {{"fs", action_name()}, {"net", action_name()}, {"exec", action_name()}};
    auto& fs = p["fs"]["rules"] = nlohmann::json::array();
    for (size_t i = below(40); i > 0; --i)
      fs.push_back({{"action", action_name()}, {"path", pattern()}, {"perms", perm_names()}});
    auto& net = p["net"]["rules"] = nlohmann::json::array();
    for (size_t i = below(40); i > 0; --i)
      net.push_back({{"action", action_name()},
                     {"proto", chance(50) ? "tcp" : "udp"},
                     {"cidr", cidr()},
                     {"ports", ports()}});
    if (chance(50)) {
      auto& deny = p["net"]["hosts"]["deny"] = nlohmann::json::array();
      for (size_t i = below(3); i > 0; --i)
        deny.push_back(host(false));
    }
    if (chance(40)) {
      auto& allow = p["net"]["hosts"]["allow"] = nlohmann::json::array();
      for (size_t i = below(4); i > 0; --i)
        allow.push_back(host(false));
    }
    auto& ex = p["exec"]["rules"] = nlohmann::json::array();
    for (size_t i = below(10); i > 0; --i) {
      nlohmann::json r = {{"action", action_name()}, {"path", pattern()}};
      if (chance(30))
        r["sha256"] = std::string(64, chance(50) ? 'a' : 'b');
      ex.push_back(r);
    }
    return p;
  }

private:
  std::mt19937 rng_;
};

} // namespace

BOOST_AUTO_TEST_SUITE(oracle)

BOOST_AUTO_TEST_CASE(compiled_agrees_with_linear) {
  generator g{20240601};
  size_t queries = 0;
  size_t disagreements = 0;
  for (int round = 0; round < 300; ++round) {
    const std::string text = g.policy().dump();
    auto doc = parse_policy(text, "<random>");
    BOOST_REQUIRE_MESSAGE(doc.has_value(), text << "\n" << (doc ? "" : t::errors_of(doc.errors())));
    const linear_policy linear{*doc};
    const auto compiled = compiled_policy::compile(*doc, "random");
    for (int q = 0; q < 60; ++q) {
      const std::string path = g.query_path();
      const fs_access a = g.access();
      const auto fa = compiled->check_fs(path, a);
      const auto fb = linear.check_fs(path, a);
      const ip_address addr = g.address(true);
      const auto proto = g.chance(50) ? net_proto::tcp : net_proto::udp;
      const uint16_t port =
          static_cast<uint16_t>(g.chance(80) ? 80 + g.below(400) : g.below(65536));
      const std::string host = g.host(true);
      const auto na = compiled->check_net(proto, addr, port, host);
      const auto nb = linear.check_net(proto, addr, port, host);
      const std::string sha = g.chance(50) ? std::string(64, g.chance(50) ? 'a' : 'b') : "";
      const auto ea = compiled->check_exec(path, sha);
      const auto eb = linear.check_exec(path, sha);
      queries += 3;
      if (fa != fb || na != nb || ea != eb) {
        ++disagreements;
        BOOST_ERROR("disagreement on policy\n"
                    << text << "\nfs " << path << " " << a << ": " << fa << " vs " << fb << "\nnet "
                    << to_string(addr) << ":" << port << " " << host << ": " << na << " vs " << nb
                    << "\nexec " << path << ": " << ea << " vs " << eb);
        if (disagreements > 5)
          return;
      }
    }
  }
  BOOST_TEST_MESSAGE("compared " << queries << " queries");
  BOOST_CHECK_GE(queries, 50000u);
}

BOOST_AUTO_TEST_SUITE_END()
