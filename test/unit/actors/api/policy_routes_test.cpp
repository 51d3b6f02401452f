// POST /v1/policies/check and /v1/policies/explain as functions: a body in,
// a response out, against a policy directory of the test's own.

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

#include "actors/api/api_json.hpp"
#include "actors/api/policy_routes.hpp"
#include "actors/api/policy_scope.hpp"
#include "support/temp_dir.hpp"

using namespace castellan;
using namespace castellan::api;
using json = nlohmann::json;

namespace {

/// A policy directory `dir/policies` with `base` (allows reading /srv) and
/// `broken` (invalid), and beside it, outside the directory, `outside.json`
/// (a valid policy no request may reach).
struct policy_dir_fixture {
  test::temp_dir tmp;
  std::string dir;

  policy_dir_fixture() {
    dir = tmp.file("policies");
    std::filesystem::create_directory(dir);
    std::ofstream{dir + "/base.json"} << R"({"version": 1, "defaults": {"fs": "deny"},
      "fs": {"rules": [{"action": "allow", "path": "/srv/**", "perms": ["read_file"]}]}})";
    std::ofstream{dir + "/broken.json"} << R"({"version": 1, "fs": 7})";
    std::ofstream{tmp.file("outside.json")} << R"({"version": 1, "description": "outside"})";
  }

  json check(const json& body, unsigned status = 200) {
    auto r = check_policy_request(body.dump(), dir);
    BOOST_TEST(r.status == status, r.body);
    return json::parse(r.body);
  }
  json explain(const json& body, unsigned status = 200) {
    auto r = explain_policy_request(body.dump(), dir);
    BOOST_TEST(r.status == status, r.body);
    return json::parse(r.body);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(api_policy_routes, policy_dir_fixture)

BOOST_AUTO_TEST_CASE(check_says_valid_or_lists_every_error_with_its_pointer) {
  BOOST_TEST(check({{"policy", {{"version", 1}}}}) == json({{"v", 1}, {"valid", true}}));
  auto bad = check({{"policy",
                     {{"version", 1},
                      {"colour", "red"},
                      {"fs", {{"rules", {{{"action", "allow"}, {"path", "etc"},
                                          {"perms", {"read_file"}}}}}}}}}});
  BOOST_TEST(bad["valid"] == false);
  BOOST_REQUIRE(bad["errors"].size() == 2u);
  BOOST_TEST(bad["errors"][0]["pointer"] == "/colour");
  BOOST_TEST(bad["errors"][1]["pointer"] == "/fs/rules/0/path");
  BOOST_TEST(bad["errors"][1]["message"].get<std::string>().find("absolute") != std::string::npos);
  BOOST_TEST(!bad["errors"][0].contains("file")); // the posted policy itself
  // extends: names of the directory resolve; an invalid one is reported in its file.
  BOOST_TEST(check({{"policy", {{"version", 1}, {"extends", {"base"}}}}})["valid"] == true);
  auto broken = check({{"policy", {{"version", 1}, {"extends", {"broken"}}}}});
  BOOST_TEST(broken["valid"] == false);
  BOOST_TEST(broken["errors"][0]["file"] == "broken");
  BOOST_TEST(broken["errors"][0]["pointer"] == "/fs");
  auto missing = check({{"policy", {{"version", 1}, {"extends", {"outside"}}}}});
  BOOST_TEST(missing["valid"] == false);
  BOOST_TEST(missing["errors"][0]["pointer"] == "/extends/0");
}

BOOST_AUTO_TEST_CASE(a_posted_policy_reads_nothing_outside_the_policy_directory) {
  // A path in extends is refused before anything is read, with its field.
  for (const char* entry : {"../outside.json", "../outside", "/etc/passwd", "x.json"}) {
    BOOST_TEST_CONTEXT(entry) {
      auto r = check({{"policy", {{"version", 1}, {"extends", {"base", entry}}}}}, 400);
      BOOST_TEST(r["error"]["code"] == "invalid_field");
      BOOST_TEST(r["error"]["field"] == "/policy/extends/1");
      auto e = explain({{"policy", {{"version", 1}, {"extends", {entry}}}}, {"fs", "read_file:/x"}},
                       400);
      BOOST_TEST(e["error"]["field"] == "/policy/extends/0");
    }
  }
  // A name is only ever one the directory lists.
  for (const char* name : {"../outside", "outside", "/etc/passwd", "base.json", "", "schema"}) {
    BOOST_TEST_CONTEXT(name) {
      auto r = explain({{"name", name}, {"fs", "read_file:/srv/a"}}, *name ? 404u : 400u);
      BOOST_TEST(r["error"]["field"] == "/name");
    }
  }
}

BOOST_AUTO_TEST_CASE(explain_decides_as_the_command_does) {
  auto r = explain({{"name", "base"},
                    {"exec", "/usr/bin/id"},
                    {"fs", {"read_file:/srv/data/a.csv", "write_file:/srv/a"}},
                    {"net", "connect:tcp:1.2.3.4:443"}});
  BOOST_TEST(r["policy"] == "base");
  const auto& d = r["decisions"];
  BOOST_REQUIRE(d.size() == 4u);
  // fs first, in the order given, then net, then exec.
  BOOST_TEST(d[0]["kind"] == "fs");
  BOOST_TEST(d[0]["query"] == "read_file:/srv/data/a.csv");
  BOOST_TEST(d[1]["query"] == "write_file:/srv/a");
  BOOST_TEST(d[2]["kind"] == "net");
  BOOST_TEST(d[3]["kind"] == "exec");
  BOOST_TEST(d[3]["decision"] == "deny");
  BOOST_TEST(d[3]["by"] == "default");
  BOOST_TEST(!d[3].contains("rule"));
  BOOST_TEST(d[3]["why"].get<std::string>().find("default") != std::string::npos);
  for (const auto& x : d)
    for (const char* key : {"kind", "query", "decision", "by", "why"})
      BOOST_TEST(x.contains(key), key);

  // A posted policy, with a rule that decides and where it came from.
  auto p = explain({{"policy",
                     {{"version", 1},
                      {"extends", {"base"}},
                      {"fs", {{"rules", {{{"action", "deny"}, {"path", "/srv/secret"},
                                          {"perms", {"read_file"}}}}}}}}},
                    {"fs", "read_file:/srv/secret"}});
  BOOST_TEST(p["policy"] == "request policy");
  const auto& x = p["decisions"][0];
  BOOST_TEST(x["decision"] == "deny");
  BOOST_TEST(x["rule"] == x["by"]);
  BOOST_TEST(x["by"].get<std::string>().rfind("/fs/rules/", 0) == 0u);
  BOOST_TEST(x["origin"] == "request policy#/fs/rules/0");
}

BOOST_AUTO_TEST_CASE(bad_requests_name_their_field) {
  struct bad_case {
    json body;
    unsigned status;
    std::string code;
    std::string field;
  };
  const json base_q = {{"name", "base"}, {"fs", "read_file:/srv/a"}};
  const std::vector<bad_case> cases = {
      {{{"policy", 5}}, 400, "invalid_field", "/policy"},
      {json::object(), 400, "invalid_field", "/policy"},
      {{{"policy", json::object()}, {"extra", 1}}, 400, "invalid_field", "/extra"},
  };
  for (const auto& c : cases) {
    BOOST_TEST_CONTEXT(c.body.dump()) {
      auto r = check(c.body, c.status);
      BOOST_TEST(r["error"]["code"] == c.code);
      BOOST_TEST(r["error"]["field"] == c.field);
    }
  }
  const std::vector<bad_case> explain_cases = {
      {{{"name", "base"}}, 400, "invalid_field", "/fs"},
      {{{"fs", "read_file:/x"}}, 400, "invalid_field", "/policy"},
      {{{"name", "base"}, {"policy", json::object()}, {"fs", "read_file:/x"}}, 400,
       "invalid_field", "/name"},
      {{{"name", "base"}, {"fs", "nonsense"}}, 400, "invalid_field", "/fs"},
      {{{"name", "base"}, {"fs", {"read_file:/x", "nonsense"}}}, 400, "invalid_field", "/fs/1"},
      {{{"name", "base"}, {"net", "tcp:1.2.3.4"}}, 400, "invalid_field", "/net"},
      {{{"name", "base"}, {"fs", json::array()}}, 400, "invalid_field", "/fs"},
      {{{"name", "base"}, {"fs", 3}}, 400, "invalid_field", "/fs"},
      {{{"name", "base"}, {"fs", "read_file:/x"}, {"color", 1}}, 400, "invalid_field", "/color"},
      {{{"name", 5}, {"fs", "read_file:/x"}}, 400, "invalid_field", "/name"},
      {{{"name", "broken"}, {"fs", "read_file:/x"}}, 400, "invalid_policy", "/name"},
      {{{"policy", {{"version", 99}}}, {"fs", "read_file:/x"}}, 400, "invalid_policy",
       "/policy/version"},
  };
  for (const auto& c : explain_cases) {
    BOOST_TEST_CONTEXT(c.body.dump()) {
      auto r = explain(c.body, c.status);
      BOOST_TEST(r["error"]["code"] == c.code);
      BOOST_TEST(r["error"]["field"] == c.field);
    }
  }
  // Too many queries: the first one beyond the bound is named.
  json many = {{"name", "base"}, {"fs", json::array()}};
  for (std::size_t i = 0; i <= max_explain_queries; ++i)
    many["fs"].push_back("read_file:/srv/" + std::to_string(i));
  auto r = explain(many, 400);
  BOOST_TEST(r["error"]["field"] == "/fs/" + std::to_string(max_explain_queries));
  // Not JSON, not an object, nested too deep.
  for (const std::string& body : {std::string("{"), std::string("[]"),
                                 "{\"policy\":" + std::string(100, '[') + std::string(100, ']') +
                                     "}"}) {
    BOOST_TEST(json::parse(check_policy_request(body, dir).body)["error"]["code"] == "bad_json");
    BOOST_TEST(json::parse(explain_policy_request(body, dir).body)["error"]["code"] ==
               "bad_json");
  }
}


BOOST_AUTO_TEST_CASE(a_restricted_scope_names_only_its_policies_and_may_always_post_its_own) {
  policy_scope scope;
  scope.token = "ci";
  scope.names = std::set<std::string>{"base"};
  auto check_in = [&](const json& body) { return check_policy_request(body.dump(), dir, scope); };
  auto explain_in = [&](const json& body) {
    return explain_policy_request(body.dump(), dir, scope);
  };
  auto refused = [](const http_response& r, const std::string& field, const std::string& name) {
    BOOST_TEST(r.status == 403u, r.body);
    const auto j = json::parse(r.body);
    BOOST_TEST(j["error"]["code"] == "policy_not_allowed", r.body);
    BOOST_TEST(j["error"]["field"] == field, r.body);
    BOOST_TEST(j["error"]["message"] ==
                   "token 'ci' may not name policy '" + name +
                       "': a token limited to some pools names only the policies its pools use "
                       "('base'), and may always send a policy of its own",
               r.body);
  };
  // Its own pools' policy: by name, and extended.
  BOOST_TEST(explain_in({{"name", "base"}, {"fs", "read_file:/srv/x"}}).status == 200u);
  BOOST_TEST(json::parse(check_in({{"policy", {{"version", 1}, {"extends", {"base"}}}}}).body)
                 ["valid"] == true);
  // Another policy of the directory: 403 naming it, whether it exists,
  // is invalid or is not there at all (no oracle for what the directory
  // holds), by name or in extends (the first refused entry).
  refused(explain_in({{"name", "broken"}, {"fs", "read_file:/x"}}), "/name", "broken");
  refused(explain_in({{"name", "nothing-here"}, {"fs", "read_file:/x"}}), "/name",
          "nothing-here");
  refused(check_in({{"policy", {{"version", 1}, {"extends", {"base", "broken"}}}}}),
          "/policy/extends/1", "broken");
  refused(explain_in({{"policy", {{"version", 1}, {"extends", {"nothing-here"}}}},
                      {"fs", "read_file:/x"}}),
          "/policy/extends/0", "nothing-here");
  // A string where the schema wants an array is looked at too.
  refused(check_in({{"policy", {{"version", 1}, {"extends", "broken"}}}}), "/policy/extends",
          "broken");
  // A policy of its own, extending nothing: always.
  auto own = explain_in({{"policy", {{"version", 1}}}, {"fs", "read_file:/srv/x"}});
  BOOST_TEST(own.status == 200u, own.body);
  BOOST_TEST(json::parse(check_in({{"policy", {{"version", 1}}}}).body)["valid"] == true);
  // Without a scope, every policy of the directory.
  BOOST_TEST(explain({{"name", "broken"}, {"fs", "read_file:/x"}}, 400)["error"]["code"] ==
             "invalid_policy");
}

BOOST_AUTO_TEST_CASE(a_scope_is_the_policies_of_the_tokens_pools) {
  const std::map<std::string, std::string> pool_policies = {
      {"alpha", "strict"}, {"beta", "default"}, {"gamma", "strict"}};
  auto s = scope_of("ci", {"alpha", "gamma", "by-path"}, pool_policies);
  BOOST_TEST(s.token == "ci");
  BOOST_TEST_REQUIRE(s.names.has_value());
  BOOST_TEST((*s.names == std::set<std::string>{"strict"}));
  BOOST_TEST(!refuse_name(s, "strict", "/name"));
  BOOST_TEST(refuse_name(s, "default", "/name")->status == 403u);
  BOOST_TEST(!refuse_name(policy_scope{}, "default", "/name"), "no scope: any");
  // A token whose pools follow no policy by name names none.
  auto none = scope_of("ci", {"by-path"}, pool_policies);
  BOOST_TEST(refuse_name(none, "strict", "/name")->message.find("(none)") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(api_body_depth)

BOOST_AUTO_TEST_CASE(depth_counts_brackets_outside_strings_only) {
  BOOST_TEST(!nests_deeper_than(R"({"a":[1,{"b":[]}]})", 4));
  BOOST_TEST(nests_deeper_than(R"({"a":[1,{"b":[]}]})", 3));
  BOOST_TEST(!nests_deeper_than(R"({"a":"[[[[[[\"[[[["})", 1));
  BOOST_TEST(nests_deeper_than(R"({"a":"\\",  "b":[[]]})", 2));
  BOOST_TEST(!nests_deeper_than("]]]]][", 1));
  BOOST_TEST(nests_deeper_than(std::string(1000000, '['), max_body_depth));
}

BOOST_AUTO_TEST_SUITE_END()
