#include <boost/test/unit_test.hpp>

#include "actors/audit/audit_query.hpp"
#include "actors/audit/audit_record.hpp"
#include "audit_test_support.hpp"

using namespace castellan;

namespace {

nlohmann::ordered_json parsed(const audit_record& rec) {
  auto j = parse_audit_line(rec.json);
  BOOST_REQUIRE(j);
  return *j;
}

} // namespace

BOOST_AUTO_TEST_SUITE(audit_query)

BOOST_AUTO_TEST_CASE(parses_records_and_refuses_other_lines) {
  BOOST_TEST(static_cast<bool>(parse_audit_line(encode(test::sample_lost(), 1, 1).json)));
  for (const char* bad : {"", "not json", "[1,2]", "{\"v\":1,\"kind\":\"x\"}", "{\"ts\":\"x\"}"})
    BOOST_TEST(!parse_audit_line(bad), bad);
}

BOOST_AUTO_TEST_CASE(since_accepts_rfc3339_and_durations) {
  const int64_t now = 1'763'769'241'000'000'000;
  int64_t out = 0;
  BOOST_REQUIRE(parse_since("90s", now, out));
  BOOST_TEST(out == now - 90'000'000'000);
  BOOST_REQUIRE(parse_since("15m", now, out));
  BOOST_TEST(out == now - 900'000'000'000);
  BOOST_REQUIRE(parse_since("2h", now, out));
  BOOST_TEST(out == now - 7'200'000'000'000);
  BOOST_REQUIRE(parse_since("1d", now, out));
  BOOST_TEST(out == now - 86'400'000'000'000);
  BOOST_REQUIRE(parse_since("2025-11-21T23:54:01Z", now, out));
  BOOST_TEST(out == 1'763'769'241'000'000'000);
  for (const char* bad : {"", "s", "10", "10w", "-5m", "yesterday"})
    BOOST_TEST(!parse_since(bad, now, out), bad);
}

BOOST_AUTO_TEST_CASE(filter_by_kind_exec_and_time) {
  const auto denied = parsed(encode(test::sample_security("syscall_denied"), 1, 1));
  const auto lost = parsed(encode(test::sample_lost(), 2, 1));
  tail_filter all;
  BOOST_TEST(tail_matches(all, denied));
  BOOST_TEST(tail_matches(all, lost));
  tail_filter kinds;
  kinds.kinds = {"worker_lost", "oom"};
  BOOST_TEST(!tail_matches(kinds, denied));
  BOOST_TEST(tail_matches(kinds, lost));
  tail_filter exec;
  exec.exec_id = 42;
  BOOST_TEST(tail_matches(exec, denied));
  BOOST_TEST(!tail_matches(exec, lost)); // exec_id 0: the worker was idle
  tail_filter since;
  since.since_ns = 1'763'769'241'400'000'000; // between the two timestamps
  BOOST_TEST(!tail_matches(since, denied));
  BOOST_TEST(tail_matches(since, lost));
}

BOOST_AUTO_TEST_CASE(pretty_lines_show_what_matters) {
  auto line = pretty_audit_line(parsed(encode(test::sample_security("syscall_denied"), 1, 1)));
  BOOST_TEST(line.find("2025-11-21T23:54:01.323456789Z") == 0u, line);
  BOOST_TEST(line.find("syscall_denied") != std::string::npos, line);
  BOOST_TEST(line.find("exec=42 pool=default worker=3") != std::string::npos, line);
  BOOST_TEST(line.find("openat /etc/shadow -> deny (rule /fs/rules/0, pid 77)") !=
                 std::string::npos,
             line);
  line = pretty_audit_line(parsed(encode(test::sample_finished(error_class::timeout), 1, 1)));
  BOOST_TEST(line.find("timeout") != std::string::npos, line);
  BOOST_TEST(line.find("error=timeout exit=124 run=2.50ms queue=15us") != std::string::npos, line);
  line = pretty_audit_line(parsed(encode(test::sample_started(), 1, 1)));
  BOOST_TEST(line.find("code=sha256:aaaaaaaaaaaaaaaa (17B)") != std::string::npos, line);
  line = pretty_audit_line(parsed(encode(test::sample_rejection(), 1, 1)));
  BOOST_TEST(line.find("policy=broken") != std::string::npos, line);
  BOOST_TEST(line.find("2 error(s)") != std::string::npos, line);
  line = pretty_audit_line(parsed(encode(test::sample_connection(), 1, 1)));
  BOOST_TEST(line.find("pypi.org:443 (151.101.0.223) -> allow") != std::string::npos, line);
  line = pretty_audit_line(parsed(encode_drop_report("file", 3, 4, 1, 1)));
  BOOST_TEST(line.find("sink=file dropped=3 (total 4)") != std::string::npos, line);
  line = pretty_audit_line(parsed(encode(test::sample_lost(), 1, 1)));
  BOOST_TEST(line.find("pid=1234 killed by signal 9") != std::string::npos, line);
  // A kind from a newer writer still shows its fields.
  auto future = parse_audit_line(R"({"v":1,"ts":"2025-11-21T23:54:01Z","kind":"quota","used":5})");
  BOOST_REQUIRE(future);
  BOOST_TEST(pretty_audit_line(*future).find("used=5") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
