// The JSON form of a result both ways: what the daemon answers is read back
// into the result that was written, so that the CLI as a client prints what
// it would have printed had it run the exec itself.

#include <boost/test/unit_test.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "actors/exec_json.hpp"

using namespace castellan;
using json = nlohmann::json;

namespace {

exec_result full() {
  exec_result r;
  r.exec_id = 42;
  r.exit_code = 1;
  r.error = error_class::exception;
  r.stdout_data = "out \xc3\xa9\n";
  r.stderr_data.assign("\xff\x00raw", 5);
  r.stdout_truncated = true;
  r.has_exception = true;
  r.exception = {"ValueError", "bad", "Traceback (most recent call last):\n"};
  policy_event e;
  e.kind = event_kind::syscall_denied;
  e.syscall = "openat";
  e.target = "/etc/shadow";
  e.decision = event_decision::deny;
  e.rule = "/fs/deny/0";
  e.pid = 7;
  e.timestamp_ns = 1234567890123;
  r.events.push_back(e);
  r.timing = {10, 2000};
  r.usage = {1500, 1 << 24};
  r.worker_id = 3;
  r.detail = "a note";
  r.enforcement = R"({"mode":"isolated","landlock":{"abi":7}})";
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(exec_json_tests)

BOOST_AUTO_TEST_CASE(a_result_reads_back_as_it_was_written) {
  for (const exec_result& r : {full(), exec_result{}}) {
    json j = json::parse(dump_json(to_json(r)));
    j["v"] = 1;        // what the API adds
    j["id"] = "mine";  // and a client's name for the exec
    auto back = result_from_json(j);
    BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
    BOOST_TEST(back->stdout_data == r.stdout_data);
    BOOST_TEST(back->stderr_data == r.stderr_data);
    BOOST_TEST(back->exception.traceback == r.exception.traceback);
    BOOST_TEST(back->events.size() == r.events.size());
    // Everything else, through the JSON form itself.
    BOOST_TEST(to_json(*back) == to_json(r));
  }
}

BOOST_AUTO_TEST_CASE(a_malformed_answer_is_named) {
  auto missing = json::parse(dump_json(to_json(full())));
  missing.erase("exit_code");
  auto a = result_from_json(missing);
  BOOST_REQUIRE(!a);
  BOOST_TEST(a.error().describe().find("result.exit_code is missing") != std::string::npos,
             a.error().describe());
  auto wrong = json::parse(dump_json(to_json(full())));
  wrong["events"][0]["kind"] = "nonsense";
  auto b = result_from_json(wrong);
  BOOST_REQUIRE(!b);
  BOOST_TEST(b.error().describe().find("result.events[0].kind 'nonsense'") != std::string::npos,
             b.error().describe());
  auto base64 = json::parse(dump_json(to_json(full())));
  base64["stdout_base64"] = true; // and it is not
  BOOST_TEST(!result_from_json(base64));
  auto negative = json::parse(dump_json(to_json(full())));
  negative["worker_id"] = -1;
  BOOST_TEST(!result_from_json(negative));
  BOOST_TEST(!result_from_json(json::array()));
}

BOOST_AUTO_TEST_CASE(a_file_of_control_characters_costs_no_more_than_its_base64) {
  // What an exec leaves at a files_out path is its own choice: 8 MiB of
  // \x01 is valid UTF-8, and as JSON text each byte took six ("\u0001"),
  // 48 MiB for the file, 192 MiB for the 32 MiB a request may bring back.
  exec_result r;
  exec_file_out f;
  f.path = "out";
  f.content.assign(std::size_t{8} << 20, '\x01');
  f.size = f.content.size();
  r.files.push_back(f);
  f.path = "text";
  f.content = "{\"a\":\"b\",\n\"c\":\"\\\\\"}\n\n\n\x1b[0m";
  f.size = f.content.size();
  r.files.push_back(f);
  const std::string text = dump_json(to_json(r));
  const std::size_t base64_bytes = ((r.files[0].content.size() + 2) / 3) * 4;
  BOOST_TEST(text.size() < base64_bytes + 4096);
  const auto j = json::parse(text);
  BOOST_TEST(j["files"][0].contains("content_base64"));
  // Text stays text, quotes, backslashes and line breaks and all.
  BOOST_TEST(j["files"][1]["content"] == r.files[1].content);
  auto back = result_from_json(j);
  BOOST_REQUIRE(back);
  BOOST_REQUIRE(back->files.size() == 2u);
  BOOST_TEST(back->files[0].content == r.files[0].content);
  BOOST_TEST(back->files[1].content == r.files[1].content);
}

BOOST_AUTO_TEST_SUITE_END()
