#include <boost/test/unit_test.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "actors/api/api_json.hpp"
#include "actors/exec_json.hpp"

using namespace castellan;
using namespace castellan::api;
using json = nlohmann::json;

namespace {

exec_result sample(std::string enforcement) {
  exec_result r;
  r.exec_id = 7;
  r.stdout_data = "out \"quoted\" \xff\n";
  r.detail = R"(a detail with "enforcement":null inside)";
  r.has_exception = true;
  r.exception = {"ValueError", "42", "Traceback…"};
  r.enforcement = std::move(enforcement);
  return r;
}

/// What `castellan exec --json` prints for `r`, plus "v": 1.
json expected(const exec_result& r) {
  json j = json::parse(dump_json(to_json(r)));
  j["v"] = 1;
  return j;
}

} // namespace

BOOST_AUTO_TEST_SUITE(api_json)

BOOST_AUTO_TEST_CASE(the_encoder_writes_what_result_body_writes) {
  result_encoder enc;
  for (int round = 0; round < 2; ++round) { // the second from the cache
    for (const std::string report :
         {R"({"mode":"isolated","landlock":{"abi":7}})", "not json {", ""}) {
      BOOST_TEST_CONTEXT("report '" << report << "', round " << round) {
        auto r = sample(report);
        const auto body = enc.body(r);
        BOOST_TEST(r.enforcement == report); // left as it was
        BOOST_TEST(json::parse(body) == expected(r));
        BOOST_TEST(json::parse(body) == json::parse(result_body(r)));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(the_cache_stays_right_past_its_capacity) {
  result_encoder enc;
  for (int i = 0; i < 150; ++i) {
    auto r = sample(R"({"worker":)" + std::to_string(i % 70) + "}");
    auto j = json::parse(enc.body(r));
    BOOST_TEST(j["enforcement"]["worker"] == i % 70);
    BOOST_TEST(j == expected(r));
  }
}

BOOST_AUTO_TEST_SUITE_END()
