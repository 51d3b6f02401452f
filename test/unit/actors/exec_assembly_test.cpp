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

BOOST_AUTO_TEST_CASE(exec_error_is_read_exactly) {
  exec_result r;
  result_extras extras;
  BOOST_REQUIRE(apply_result_payload(
    R"({"exit_code": 126, "exception": null, "exec_error": {"program": "/usr/bin/id", "errno": 13}})",
    r, extras));
  BOOST_TEST(r.exit_code == 126);
  BOOST_REQUIRE(extras.exec_error.has_value());
  BOOST_TEST(extras.exec_error->program == "/usr/bin/id");
  BOOST_TEST(extras.exec_error->error_number == 13);

  result_extras none;
  BOOST_REQUIRE(apply_result_payload(R"({"exit_code": 126, "exception": null})", r, none));
  BOOST_TEST(!none.exec_error.has_value());
}

BOOST_AUTO_TEST_CASE(a_hostile_exec_error_is_a_protocol_error) {
  // RESULT frames come from the worker: every wrong shape is refused with
  // the field's name, none crashes, none is half-read.
  const char* const cases[] = {
    R"("exec_error": null)",
    R"("exec_error": "/usr/bin/id")",
    R"("exec_error": [13])",
    R"("exec_error": {})",
    R"("exec_error": {"program": "/usr/bin/id"})",
    R"("exec_error": {"errno": 13})",
    R"("exec_error": {"program": 7, "errno": 13})",
    R"("exec_error": {"program": "", "errno": 13})",
    R"("exec_error": {"program": null, "errno": 13})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": "13"})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 13.5})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 0})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": -13})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 4096})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 18446744073709551615})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 1e300})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": true})",
    R"("exec_error": {"program": "/usr/bin/id", "errno": 13, "path": "/etc/shadow"})",
    R"("exec_error": {"program": ["/usr/bin/id"], "errno": 13})",
  };
  for (const char* field : cases) {
    const std::string payload = std::string(R"({"exit_code": 126, "exception": null, )") +
                                field + "}";
    exec_result r;
    result_extras extras;
    auto ok = apply_result_payload(payload, r, extras);
    BOOST_TEST(!ok, payload);
    if (!ok)
      BOOST_TEST(ok.error().message.find("exec_error") != std::string::npos,
                 payload << " -> " << ok.error().message);
    BOOST_TEST(!extras.exec_error.has_value(), payload);
  }
}

BOOST_AUTO_TEST_SUITE_END()
