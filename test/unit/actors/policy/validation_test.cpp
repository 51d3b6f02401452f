/// Validation: the corpus of invalid policies (each names the JSON pointer and
/// a fragment of the message it must produce), the pre-built policies, and
/// hostile input that must be refused without a crash or an exception.

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <random>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/json_format.hpp"
#include "actors/policy/engine/json_reader.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "policy_test_support.hpp"

using namespace castellan::policy;
namespace t = castellan::policy::test;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in{path};
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

BOOST_AUTO_TEST_SUITE(validation)

BOOST_AUTO_TEST_CASE(invalid_corpus) {
  const std::string dir = t::source_dir() + "/test/unit/actors/policy/invalid";
  auto files = list_policy_files(dir);
  BOOST_REQUIRE(files.has_value());
  BOOST_REQUIRE_GE(files->size(), 30u);
  for (const auto& file : *files) {
    BOOST_TEST_CONTEXT(file) {
      const auto spec = nlohmann::json::parse(read_file(file));
      const std::string text = spec.contains("policy_text") ? spec["policy_text"].get<std::string>()
                                                            : spec["policy"].dump(2);
      const std::string want_pointer = spec["expect"]["pointer"];
      const std::string want_message = spec["expect"]["message"];
      auto doc = parse_policy(text, file);
      validated<policy_document> result = doc;
      if (doc)
        result = resolve_extends(*doc, dir, t::policies_dir());
      BOOST_REQUIRE_MESSAGE(!result.has_value(), "accepted an invalid policy");
      bool found = false;
      for (const auto& e : result.errors()) {
        BOOST_CHECK_EQUAL(e.file, file);
        BOOST_CHECK(!e.message.empty());
        if (e.pointer == want_pointer && e.message.find(want_message) != std::string::npos)
          found = true;
      }
      BOOST_CHECK_MESSAGE(found, "no error at '" << want_pointer << "' containing '" << want_message
                                                 << "'; got:\n"
                                                 << t::errors_of(result.errors()));
    }
  }
}

BOOST_AUTO_TEST_CASE(error_names_file_pointer_value_and_rule) {
  auto doc = parse_policy(R"({"version": 1, "net": {"rules": [
    {"action": "deny", "proto": "tcp", "cidr": "10.0.0.1/8", "ports": "80"}]}})",
                          "my.json");
  BOOST_REQUIRE(!doc.has_value());
  BOOST_REQUIRE_EQUAL(doc.errors().size(), 1u);
  const auto& e = doc.errors().front();
  BOOST_CHECK_EQUAL(e.file, "my.json");
  BOOST_CHECK_EQUAL(e.pointer, "/net/rules/0/cidr");
  BOOST_CHECK_EQUAL(e.value, "\"10.0.0.1/8\"");
  BOOST_CHECK_EQUAL(e.describe(), "my.json: /net/rules/0/cidr: \"10.0.0.1/8\": host bits set "
                                  "beyond /8 (the network is 10.0.0.0/8) (cidr)");
}

BOOST_AUTO_TEST_CASE(every_error_is_reported) {
  auto doc = parse_policy(R"({"version": 1, "defaults": {"fs": "nope"},
    "fs": {"rules": [{"action": "allow", "path": "rel", "perms": ["read_file"]}]},
    "net": {"rules": [{"action": "deny", "proto": "tcp", "cidr": "1.2.3.4/33", "ports": "x"}]},
    "antiEscape": {"denySyscalls": ["nosuchcall"]}})",
                          "many.json");
  BOOST_REQUIRE(!doc.has_value());
  std::set<std::string> pointers;
  for (const auto& e : doc.errors())
    pointers.insert(e.pointer);
  for (const char* p : {"/defaults/fs", "/fs/rules/0/path", "/net/rules/0/cidr",
                        "/net/rules/0/ports", "/antiEscape/denySyscalls/0"})
    BOOST_CHECK_MESSAGE(pointers.count(p) == 1, "missing error at " << p);
}

BOOST_AUTO_TEST_CASE(pointer_escaping) {
  auto doc = parse_policy(R"({"version": 1, "a/b~c": 1})", "esc.json");
  BOOST_REQUIRE(!doc.has_value());
  BOOST_CHECK_EQUAL(doc.errors().front().pointer, "/a~1b~0c");
}

BOOST_AUTO_TEST_CASE(prebuilt_policies_are_valid) {
  auto files = list_policy_files(t::policies_dir());
  BOOST_REQUIRE(files.has_value());
  BOOST_CHECK_GE(files->size(), 11u);
  for (const auto& f : *files) {
    auto doc = load_policy(f, t::policies_dir());
    BOOST_CHECK_MESSAGE(doc.has_value(), f << ":\n" << (doc ? "" : t::errors_of(doc.errors())));
    if (doc)
      BOOST_CHECK_MESSAGE(!doc->description.empty(), f << " has no description");
    // Each file alone (without extends) is valid too.
    auto alone = read_policy_file(f);
    BOOST_CHECK_MESSAGE(alone.has_value(), f);
  }
}

BOOST_AUTO_TEST_CASE(round_trip_through_json) {
  // A merged policy printed as JSON parses back to the same policy.
  auto files = list_policy_files(t::policies_dir());
  BOOST_REQUIRE(files.has_value());
  for (const auto& f : *files) {
    auto doc = load_policy(f, t::policies_dir());
    BOOST_REQUIRE(doc.has_value());
    const std::string text = to_json(*doc).dump();
    auto again = parse_policy(text, f);
    BOOST_REQUIRE_MESSAGE(again.has_value(), f << ":\n"
                                               << (again ? "" : t::errors_of(again.errors())));
    BOOST_CHECK_EQUAL(to_json(*again).dump(), text);
    // The human layout (one rule per line) is the same JSON.
    const std::string pretty = format_json(to_json(*doc));
    BOOST_CHECK_EQUAL(nlohmann::ordered_json::parse(pretty).dump(), text);
    if (!doc->fs_rules.empty())
      BOOST_CHECK(pretty.find("{ \"action\": \"") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(hostile_bytes_never_throw) {
  std::mt19937 rng{12345};
  const std::string alphabet = "{}[]\",:0123456789.-eE truefalsnul\\/*abc\xff\x00";
  const std::string seed = read_file(t::policies_dir() + "/net-egress.json");
  for (int i = 0; i < 3000; ++i) {
    std::string text;
    if (i % 2 == 0) {
      const size_t n = rng() % 200;
      for (size_t k = 0; k < n; ++k)
        text += alphabet[rng() % alphabet.size()];
    } else {
      // Mutations of a valid policy reach far deeper into the checks.
      text = seed;
      for (int m = 0; m < 4; ++m)
        text[rng() % text.size()] = alphabet[rng() % alphabet.size()];
    }
    BOOST_CHECK_NO_THROW({
      auto doc = parse_policy(text, "<random>");
      if (doc)
        compiled_policy::compile(std::move(*doc), "random");
    });
  }
  // Deep nesting and huge inputs are refused, not recursed into.
  BOOST_CHECK(!parse_policy(std::string(100000, '['), "<deep>").has_value());
  BOOST_CHECK(!parse_policy(std::string(max_policy_bytes + 1, ' '), "<big>").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
