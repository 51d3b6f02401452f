// What a policy makes of a pool (actors/pool/pool_policy.hpp): the parts
// that need no worker.

#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_policy.hpp"

using namespace castellan;

namespace {

const char* no_exec_policy = R"({"version": 1, "description": "no exec",
  "defaults": {"fs": "deny", "net": "deny", "exec": "deny"},
  "fs": {"rules": [{"action": "allow", "path": "/usr", "perms": ["read_file"]}]},
  "limits": {"memory_bytes": 134217728}})";

bool has(const std::vector<std::string>& v, const std::string& x) {
  return std::find(v.begin(), v.end(), x) != v.end();
}

std::shared_ptr<const policy::compiled_policy> no_exec() {
  auto doc = policy::parse_policy(no_exec_policy, "no-exec.json");
  BOOST_REQUIRE(doc);
  return policy::compiled_policy::compile(std::move(*doc), "no-exec", 3);
}

} // namespace

BOOST_AUTO_TEST_SUITE(pool_policy_tests)

BOOST_AUTO_TEST_CASE(a_pool_under_a_policy_is_named_after_it_and_restricted_by_it) {
  pool_config base;
  base.name = "p";
  auto under = pool_config_under(base, no_exec());
  BOOST_REQUIRE(under);
  BOOST_TEST(under->policy_name == "no-exec");
  BOOST_TEST(under->policy->revision() == 3u);
  BOOST_TEST(under->sandbox.restrict_execute);
  BOOST_TEST(has(under->sandbox.exec_allowed, base.python));
  BOOST_TEST(under->limits.memory_bytes == 134217728u);
  BOOST_TEST(under->sandbox.fs_policy.get() == under->policy.get());
  BOOST_TEST(!under->egress_policy); // no network allowed
  // Without a policy: the base as given.
  auto plain = pool_config_under(base, nullptr);
  BOOST_REQUIRE(plain);
  BOOST_TEST(!plain->sandbox.restrict_execute);
  BOOST_TEST(plain->policy_name == base.policy_name);
}

BOOST_AUTO_TEST_CASE(a_pool_without_its_policy_keeps_its_layers_and_limits) {
  pool_config base;
  base.name = "p";
  base.sandbox.hostname = "h";
  auto under = pool_config_under(base, no_exec());
  BOOST_REQUIRE(under);
  const auto t = pool_without_policy(*under);
  BOOST_TEST(!t.policy);
  BOOST_TEST(!t.sandbox.fs_policy);
  BOOST_TEST(!t.sandbox.restrict_execute);
  BOOST_TEST(t.sandbox.exec_allowed.empty());
  BOOST_TEST(t.sandbox.hostname == "h");
  BOOST_TEST(t.name.empty());
  BOOST_TEST(t.policy_name.empty());
  BOOST_TEST(t.limits.memory_bytes == 134217728u);
}

BOOST_AUTO_TEST_CASE(the_program_asked_for_may_run_where_exec_is_restricted) {
  pool_config open;
  allow_program_to_run(open, "/usr/bin/id");
  BOOST_TEST(open.sandbox.exec_allowed.empty()); // nothing restricted, nothing to grant

  auto under = pool_config_under(pool_config{}, no_exec());
  BOOST_REQUIRE(under);
  BOOST_TEST(!has(under->sandbox.exec_allowed, "/usr/bin/id"));
  allow_program_to_run(*under, "/usr/bin/id");
  BOOST_TEST(has(under->sandbox.exec_allowed, "/usr/bin/id"));
  allow_program_to_run(*under, "env");
  for (const char* path : {"/usr/local/bin/env", "/usr/bin/env", "/bin/env"})
    BOOST_TEST(has(under->sandbox.exec_allowed, path), path);
}

BOOST_AUTO_TEST_SUITE_END()
