/// exec rules: paths, globs, pinned sha256 digests.

#include <boost/test/unit_test.hpp>

#include "policy_test_support.hpp"

using namespace castellan::policy;
using castellan::policy::test::from_text;

namespace {

const std::string good_sha(64, 'a');
const std::string other_sha(64, 'b');

} // namespace

BOOST_AUTO_TEST_SUITE(exec_matching)

// The reference's exec example.
BOOST_AUTO_TEST_CASE(reference_exec_example) {
  auto p = from_text(R"({"version": 1, "defaults": {"exec": "allow"}, "exec": {"rules": [
      { "action": "allow", "path": "/usr/bin/python3" },
      { "action": "allow", "path": "/usr/bin/python3.12" },
      { "action": "deny", "path": "/bin/*" }
    ]}})");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3").pointer, "/exec/rules/0");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3.12").pointer, "/exec/rules/1");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3.11").pointer, "default");
  BOOST_CHECK_EQUAL(p.exec("/bin/sh").verdict, action::deny);
  BOOST_CHECK_EQUAL(p.exec("/bin/sh").pointer, "/exec/rules/2");
  BOOST_CHECK_EQUAL(p.exec("/bin").pointer, "default");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/../../bin/sh").pointer, "/exec/rules/2");
}

BOOST_AUTO_TEST_CASE(sha256_pins) {
  const std::string text = R"({"version": 1, "defaults": {"exec": "deny"}, "exec": {"rules": [
      {"action": "allow", "path": "/usr/bin/python3", "sha256": ")" +
                           good_sha + R"("},
      {"action": "deny", "path": "/usr/bin", "sha256": ")" +
                           std::string(64, 'C') + R"("},
      {"action": "warn", "path": "/opt/tool"}
    ]}})";
  auto p = from_text(text);
  // A pinned allow only applies when the digest is known and equal.
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3", good_sha).pointer, "/exec/rules/0");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3", std::string(64, 'A')).pointer, "/exec/rules/0");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3", other_sha).pointer, "default");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3").pointer, "default");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3", "not-a-digest").pointer, "default");
  // A pinned deny blocks one known binary wherever it sits below the rule
  // (digests in rules are normalised to lower case).
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/evil", std::string(64, 'c')).pointer, "/exec/rules/1");
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3", std::string(64, 'c')).verdict, action::deny);
  BOOST_CHECK_EQUAL(p.exec("/opt/tool/run").verdict, action::warn);
}

BOOST_AUTO_TEST_CASE(invalid_exec_queries) {
  auto p = from_text(R"({"version": 1, "defaults": {"exec": "allow"}})");
  BOOST_CHECK_EQUAL(p.exec("python3").pointer, "invalid");
  BOOST_CHECK_EQUAL(p.exec("").verdict, action::deny);
  BOOST_CHECK_EQUAL(p.exec("/usr/bin/python3").pointer, "default");
}

BOOST_AUTO_TEST_SUITE_END()
