/// The canonical form of a policy: every spelling of the same policy gives
/// the same text, and any change to what it enforces gives another.

#include <boost/test/unit_test.hpp>

#include "actors/policy/engine/merge.hpp"
#include "actors/policy/engine/policy_canonical.hpp"
#include "policy_test_support.hpp"

using namespace castellan::policy;
namespace t = castellan::policy::test;

namespace {

policy_document parse(const std::string& text) {
  auto doc = parse_policy(text, "<test>");
  BOOST_REQUIRE_MESSAGE(doc.has_value(), (doc ? "" : t::errors_of(doc.errors())));
  return *doc;
}

std::string canon(const std::string& text) {
  return canonical_text(parse(text));
}

const char* const base = R"({
  "version": 1,
  "description": "one way of writing it",
  "plugins": { "landlock": true },
  "defaults": { "fs": "deny" },
  "fs": { "rules": [
    { "action": "allow", "path": "/data/", "perms": ["read_file", "read_dir"] },
    { "action": "allow", "path": "/tmp", "perms": ["write_dir", "read_file"] } ] },
  "net": { "rules": [ { "action": "allow", "proto": "tcp", "cidr": "10.0.0.0/8", "ports": "443,80,81" } ] },
  "antiEscape": { "denySyscalls": ["ptrace", "bpf"] },
  "limits": { "pids": 16 }
})";

} // namespace

BOOST_AUTO_TEST_SUITE(canonical_form)

BOOST_AUTO_TEST_CASE(key_order_whitespace_and_spellings_do_not_matter) {
  // The same policy: keys reordered, no whitespace, another description,
  // the plugin as an object, the default deny left implicit, permissions
  // and syscalls reordered, write_dir spelled out, ports as ranges.
  const char* const other =
      R"({"limits":{"pids":16},"antiEscape":{"denySyscalls":["bpf","ptrace"]},)"
      R"("net":{"rules":[{"ports":"80-81,443","cidr":"10.0.0.0/8","proto":"tcp","action":"allow"}]},)"
      R"("fs":{"rules":[{"perms":["read_dir","read_file"],"path":"/data","action":"allow"},)"
      R"({"path":"/tmp","action":"allow","perms":["read_file","remove_dir","remove_file","make_char",)"
      R"("make_dir","make_reg","make_sock","make_fifo","make_block","make_sym"]}]},)"
      R"("plugins":{"landlock":{"enabled":true,"best_effort":false}},"version":1,)"
      R"("description":"written differently"})";
  BOOST_TEST(canon(base) == canon(other));
}

BOOST_AUTO_TEST_CASE(what_is_enforced_changes_the_form) {
  const std::string a = canon(base);
  auto changed = [&](const std::string& from, const std::string& to) {
    std::string text = base;
    const auto pos = text.find(from);
    BOOST_REQUIRE(pos != std::string::npos);
    text.replace(pos, from.size(), to);
    return canon(text);
  };
  BOOST_TEST(changed("\"/data/\"", "\"/data2\"") != a);
  BOOST_TEST(changed("\"read_file\", \"read_dir\"", "\"read_file\"") != a);
  BOOST_TEST(changed("\"pids\": 16", "\"pids\": 17") != a);
  BOOST_TEST(changed("\"landlock\": true",
                     "\"landlock\": {\"enabled\": true, \"best_effort\": true}") != a);
  BOOST_TEST(changed("\"443,80,81\"", "\"443\"") != a);
  BOOST_TEST(changed("[\"ptrace\", \"bpf\"]", "[\"ptrace\"]") != a);
  // Rule order decides which rule a decision names: it is kept.
  std::string swapped = base;
  const std::string r0 =
      R"({ "action": "allow", "path": "/data/", "perms": ["read_file", "read_dir"] })";
  const std::string r1 =
      R"({ "action": "allow", "path": "/tmp", "perms": ["write_dir", "read_file"] })";
  swapped.replace(swapped.find(r0), r0.size(), "R0");
  swapped.replace(swapped.find(r1), r1.size(), r0);
  swapped.replace(swapped.find("R0"), 2, r1);
  BOOST_TEST(canon(swapped) != a);
}

BOOST_AUTO_TEST_CASE(a_merged_policy_equals_its_flat_equivalent) {
  auto lower = parse(R"({"version": 1, "defaults": {"fs": "allow"},
    "fs": {"rules": [{"action": "allow", "path": "/a", "perms": ["read_file"]}]}})");
  auto upper = parse(R"({"version": 1, "defaults": {"fs": "deny"},
    "fs": {"rules": [{"action": "deny", "path": "/b", "perms": ["read_file"]}]}})");
  auto flat = parse(R"({"version": 1, "defaults": {"fs": "deny"},
    "fs": {"rules": [{"action": "allow", "path": "/a", "perms": ["read_file"]},
                     {"action": "deny", "path": "/b", "perms": ["read_file"]}]}})");
  BOOST_TEST(canonical_text(merge_policies({lower, upper})) == canonical_text(flat));
}

BOOST_AUTO_TEST_CASE(the_form_is_itself_a_valid_policy_of_the_same_meaning) {
  const auto doc = parse(base);
  auto again = parse_policy(canonical_text(doc), "<canonical>");
  BOOST_REQUIRE_MESSAGE(again.has_value(), (again ? "" : t::errors_of(again.errors())));
  BOOST_TEST(canonical_text(*again) == canonical_text(doc));
}

BOOST_AUTO_TEST_SUITE_END()
