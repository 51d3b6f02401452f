// The pool spec across CAF's binary serializer: every field comes back, a
// policy carried as text is validated and compiled again on arrival, and
// bytes a peer corrupted are an error.

#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include <algorithm>

#include "actors/errors.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_spec.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

const char* data_policy = R"({"version": 1, "description": "data",
  "defaults": {"fs": "deny", "net": "deny", "exec": "deny"},
  "fs": {"rules": [{"action": "allow", "path": "/data", "perms": ["read_file"]}]}})";

const char* other_policy = R"({"version": 1, "description": "other",
  "defaults": {"fs": "deny", "net": "deny", "exec": "deny"},
  "fs": {"rules": [{"action": "allow", "path": "/srv", "perms": ["read_file"]}]}})";

constexpr uint32_t read_file = policy::to_access(policy::fs_perm::read_file);

std::shared_ptr<const policy::compiled_policy> compiled(const char* text, std::string name,
                                                       uint64_t revision) {
  auto doc = policy::parse_policy(text, name + ".json");
  BOOST_REQUIRE(doc);
  return policy::compiled_policy::compile(std::move(*doc), std::move(name), revision);
}

/// A spec with no field at its default.
pool_spec every_field_set() {
  pool_spec s;
  s.name = "analytics";
  s.size = 7;
  s.queue_limit = 9;
  s.python = "/opt/py/bin/python3";
  s.worker_binary = "/opt/c/castellan-worker";
  s.harness = "/opt/c/castellan_harness.py";
  s.warm_start = true;
  s.launcher_binary = "/opt/c/castellan-launcher";
  s.ring_capacity = 3u << 20;
  s.stdout_limit = 11;
  s.stderr_limit = 12;
  s.code_limit = 13;
  s.default_timeout_ms = 14;
  s.recycle_after = 15;
  s.mode = exec_mode::shared;
  s.worker_stderr = true;
  s.isolation = platform::isolation_mode::none;
  s.limits = {16, 17, 18};
  s.sandbox.landlock = false;
  s.sandbox.landlock_best_effort = false;
  s.sandbox.seccomp = false;
  s.sandbox.cgroups = false;
  s.sandbox.cgroups_best_effort = true;
  s.sandbox.deny_syscalls = {"ptrace"};
  s.sandbox.kill_syscalls = {"kexec_load"};
  s.sandbox.extra_paths = {{"/data", false, 19}, {"/scratch", true, 20}};
  s.sandbox.masked_paths = {"/data/secret"};
  s.sandbox.restrict_execute = true;
  s.sandbox.exec_allowed = {"/usr/bin/python3"};
  s.sandbox.notify.syscalls = {"openat", "connect"};
  s.sandbox.notify.open_writes_only = true;
  s.sandbox.loopback = false;
  s.sandbox.hostname = "box";
  s.sandbox.tmp_size_bytes = 21;
  s.policy_name = "data";
  s.egress_port = 22;
  s.events_limit = 23;
  s.policy = compiled(data_policy, "data", 5);
  s.sandbox.fs_policy = s.policy;
  s.named_policy = "data";
  return s;
}

std::vector<char> to_bytes(caf::actor_system& sys, pool_spec spec) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(spec));
  return buf;
}

caf::error from_bytes(caf::actor_system& sys, const std::vector<char>& buf, pool_spec& out) {
  caf::binary_deserializer source{sys, buf};
  return source(out);
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(pool_spec_tests, test::actor_system_fixture)

BOOST_AUTO_TEST_CASE(every_field_survives_binary_serialization) {
  const auto sent = every_field_set();
  const auto bytes = to_bytes(sys, sent);
  pool_spec back;
  const auto err = from_bytes(sys, bytes, back);
  BOOST_REQUIRE_MESSAGE(!err, sys.render(err));
  // Sent again, the received spec gives the same bytes: no field was lost.
  BOOST_TEST((to_bytes(sys, back) == bytes));
  BOOST_TEST(back.name == "analytics");
  BOOST_TEST((back.mode == exec_mode::shared));
  BOOST_TEST((back.isolation == platform::isolation_mode::none));
  BOOST_TEST(back.limits.cpu_percent == 18u);
  BOOST_TEST(back.sandbox.extra_paths.at(1).path == "/scratch");
  BOOST_TEST(back.sandbox.extra_paths.at(1).writable);
  BOOST_TEST(back.sandbox.notify.syscalls.at(1) == "connect");
  BOOST_TEST(back.named_policy == "data");
  // The policy was compiled again from its text: another object, the same
  // name, revision and decisions; the sandbox's fs policy is still the pool's.
  BOOST_REQUIRE(back.policy);
  BOOST_TEST(back.policy.get() != sent.policy.get());
  BOOST_TEST(back.policy->name() == "data");
  BOOST_TEST(back.policy->revision() == 5u);
  BOOST_TEST(back.policy->json_text() == sent.policy->json_text());
  BOOST_TEST((back.policy->check_fs("/data/x", read_file).verdict == policy::action::allow));
  BOOST_TEST((back.policy->check_fs("/etc/x", read_file).verdict == policy::action::deny));
  BOOST_TEST(back.sandbox.fs_policy.get() == back.policy.get());
}

BOOST_AUTO_TEST_CASE(a_sandbox_fs_policy_of_its_own_and_no_policy_survive) {
  auto sent = every_field_set();
  sent.sandbox.fs_policy = compiled(other_policy, "other", 2);
  pool_spec back;
  BOOST_REQUIRE(!from_bytes(sys, to_bytes(sys, sent), back));
  BOOST_REQUIRE(back.sandbox.fs_policy);
  BOOST_TEST(back.sandbox.fs_policy->name() == "other");
  BOOST_TEST((back.sandbox.fs_policy->check_fs("/srv/x", read_file).verdict ==
              policy::action::allow));
  BOOST_TEST((back.policy->check_fs("/srv/x", read_file).verdict == policy::action::deny));

  // A spec without any policy stays without one (the defaults, as sent).
  pool_spec plain_back = every_field_set();
  BOOST_REQUIRE(!from_bytes(sys, to_bytes(sys, pool_spec{}), plain_back));
  BOOST_TEST(!plain_back.policy);
  BOOST_TEST(!plain_back.sandbox.fs_policy);
  BOOST_TEST((to_bytes(sys, plain_back) == to_bytes(sys, pool_spec{})));
}

BOOST_AUTO_TEST_CASE(a_pool_config_sends_its_spec_and_keeps_its_handles_home) {
  pool_config pool{every_field_set()};
  pool.egress_policy = pool.policy;
  BOOST_TEST((to_bytes(sys, pool.spec()) == to_bytes(sys, every_field_set())));
}

BOOST_AUTO_TEST_CASE(a_broken_policy_text_is_an_error_not_a_crash) {
  const auto sent = every_field_set();
  auto bytes = to_bytes(sys, sent);
  // Corrupt the policy's JSON text in place (its length unchanged), as a
  // peer or the wire could.
  const std::string text = sent.policy->json_text();
  auto at = std::search(bytes.begin(), bytes.end(), text.begin(), text.end());
  BOOST_REQUIRE(at != bytes.end());
  *at = 'x';
  pool_spec back;
  const auto err = from_bytes(sys, bytes, back);
  BOOST_REQUIRE(err);
  BOOST_TEST((err.code() == static_cast<uint8_t>(castellan_errc::policy_invalid)),
             sys.render(err));

  // Cut short anywhere: an error each time.
  const auto whole = to_bytes(sys, sent);
  for (size_t n = 0; n < whole.size(); n += 97) {
    std::vector<char> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
    pool_spec partial;
    BOOST_TEST(static_cast<bool>(from_bytes(sys, cut, partial)), "cut at " << n);
  }
}

BOOST_AUTO_TEST_CASE(enumerations_out_of_range_are_refused) {
  pool_spec s;
  BOOST_TEST(!check_received_pool_spec(s));
  s.mode = static_cast<exec_mode>(7);
  BOOST_TEST(static_cast<bool>(check_received_pool_spec(s)));
  s.mode = exec_mode::isolated;
  s.isolation = static_cast<platform::isolation_mode>(9);
  BOOST_TEST(static_cast<bool>(check_received_pool_spec(s)));
}

BOOST_AUTO_TEST_SUITE_END()
