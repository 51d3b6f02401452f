#pragma once

/// @file policy_test_support.hpp
/// Helpers of the policy engine tests: compile policies from text and check
/// every query with both evaluators, so that each table-driven case is also
/// an oracle comparison.

#include <boost/test/unit_test.hpp>

#include <memory>
#include <ostream>
#include <string>
#include <string_view>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/linear_policy.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"

namespace castellan::policy {

inline std::ostream& operator<<(std::ostream& os, action a) {
  return os << to_string(a);
}

inline std::ostream& operator<<(std::ostream& os, const decision& d) {
  return os << to_string(d.verdict) << " by " << d.pointer << " (index " << d.index << ")";
}

} // namespace castellan::policy

namespace castellan::policy::test {

/// The source tree (for policies/ and the invalid corpus).
inline std::string source_dir() {
  return CASTELLAN_TEST_SOURCE_DIR;
}

inline std::string policies_dir() {
  return source_dir() + "/policies";
}

inline std::string errors_of(const std::vector<policy_error>& errors) {
  std::string out;
  for (const auto& e : errors)
    out += e.describe() + "\n";
  return out;
}

/// Both evaluators of one policy.
struct evaluators {
  std::shared_ptr<const compiled_policy> compiled;
  std::shared_ptr<const linear_policy> linear;

  decision fs(std::string_view path, fs_access access) const {
    const decision a = compiled->check_fs(path, access);
    const decision b = linear->check_fs(path, access);
    BOOST_CHECK_MESSAGE(a == b, "fs " << path << ": compiled " << a << " != linear " << b);
    return a;
  }
  decision net(net_proto proto, std::string_view addr, uint16_t port,
               std::string_view host = {}) const {
    const decision a = compiled->check_net(proto, addr, port, host);
    const decision b = linear->check_net(proto, addr, port, host);
    BOOST_CHECK_MESSAGE(a == b, "net " << addr << ":" << port << " " << host << ": compiled " << a
                                       << " != linear " << b);
    return a;
  }
  decision exec(std::string_view path, std::string_view sha256 = {}) const {
    const decision a = compiled->check_exec(path, sha256);
    const decision b = linear->check_exec(path, sha256);
    BOOST_CHECK_MESSAGE(a == b, "exec " << path << ": compiled " << a << " != linear " << b);
    return a;
  }
};

inline evaluators make_evaluators(policy_document doc) {
  evaluators out;
  out.linear = std::make_shared<const linear_policy>(doc);
  out.compiled = compiled_policy::compile(std::move(doc), "test");
  return out;
}

/// Parses, checks and compiles `text` (a test failure if it is invalid).
inline evaluators from_text(std::string_view text) {
  auto doc = parse_policy(text, "<test>");
  BOOST_REQUIRE_MESSAGE(doc.has_value(), "policy invalid:\n"
                                             << (doc ? "" : errors_of(doc.errors())));
  return make_evaluators(std::move(*doc));
}

/// Loads a pre-built policy of policies/ with its extends.
inline evaluators prebuilt(const std::string& name) {
  auto doc = load_policy(policies_dir() + "/" + name + ".json", policies_dir());
  BOOST_REQUIRE_MESSAGE(doc.has_value(), name << " invalid:\n"
                                              << (doc ? "" : errors_of(doc.errors())));
  return make_evaluators(std::move(*doc));
}

} // namespace castellan::policy::test
