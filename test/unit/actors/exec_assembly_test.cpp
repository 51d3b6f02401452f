#include <boost/test/unit_test.hpp>

#include "actors/pool/exec_assembly.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(exec_assembly)

BOOST_AUTO_TEST_CASE(output_is_capped_and_flagged) {
  std::string out;
  bool truncated = false;
  append_capped(out, truncated, "hello ", 8);
  BOOST_TEST(out == "hello ");
  BOOST_TEST(!truncated);
  append_capped(out, truncated, "world", 8);
  BOOST_TEST(out == "hello wo");
  BOOST_TEST(truncated);
  append_capped(out, truncated, "more", 8);
  BOOST_TEST(out == "hello wo");
}

BOOST_AUTO_TEST_CASE(valid_payloads) {
  exec_result r;
  BOOST_REQUIRE(apply_result_payload(R"({"exit_code": 3, "exception": null})", r));
  BOOST_TEST(r.exit_code == 3);
  BOOST_TEST((r.error == error_class::ok));
  BOOST_TEST(!r.has_exception);

  exec_result e;
  BOOST_REQUIRE(apply_result_payload(
    R"({"exit_code": 1, "exception": {"type": "ValueError", "message": "x", "traceback": "T"}})",
    e));
  BOOST_TEST((e.error == error_class::exception));
  BOOST_TEST(e.exception.type == "ValueError");
  BOOST_TEST(e.exception.message == "x");
  BOOST_TEST(e.exception.traceback == "T");
}

BOOST_AUTO_TEST_CASE(hostile_payloads_are_errors_naming_the_field) {
  struct bad_case {
    const char* payload;
    const char* fragment;
  };
  const bad_case cases[] = {
    {"", "not a JSON object"},
    {"[1]", "not a JSON object"},
    {"{\"exit_code\": \"0\"}", "exit_code"},
    {"{}", "exit_code"},
    {"{\"exit_code\": 1.5}", "exit_code"},
    {"{\"exit_code\": 99999999999}", "out of range"},
    {"{\"exit_code\": 0, \"exception\": 7}", "exception"},
    {"{\"exit_code\": 0, \"exception\": {\"type\": 1}}", "exception.type"},
    {"{\"exit_code\": 0, \"exception\": {\"traceback\": []}}", "exception.traceback"},
    {"{\"exit_code\": 0", "not a JSON object"},
  };
  for (const auto& c : cases) {
    exec_result r;
    auto ok = apply_result_payload(c.payload, r);
    BOOST_TEST(!ok, c.payload);
    if (!ok)
      BOOST_TEST(ok.error().message.find(c.fragment) != std::string::npos,
                 c.payload << " -> " << ok.error().message);
  }
}

BOOST_AUTO_TEST_SUITE_END()
