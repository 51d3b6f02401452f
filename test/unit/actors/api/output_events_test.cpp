// An exec's output as server-sent events: pieces in order, text kept as
// text across a character cut between pieces, bytes as base64, and the
// result's remainder before the result event.

#include <boost/test/unit_test.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "actors/api/output_events.hpp"

using namespace castellan;
using namespace castellan::api;
using json = nlohmann::json;

namespace {

exec_output piece(std::string data, bool is_stderr = false) {
  return exec_output{9, is_stderr, std::move(data)};
}

/// The data of the one event in `text`.
json data_of(const std::string& text) {
  const std::string tag = "\ndata: ";
  const auto start = text.find(tag) + tag.size();
  return json::parse(text.substr(start, text.find('\n', start) - start));
}

} // namespace

BOOST_AUTO_TEST_SUITE(api_output_events)

BOOST_AUTO_TEST_CASE(an_event_is_its_name_and_one_data_line) {
  BOOST_TEST(sse_event("stdout", R"({"a":1})") == "event: stdout\ndata: {\"a\":1}\n\n");
}

BOOST_AUTO_TEST_CASE(a_character_cut_between_pieces_stays_text) {
  output_events ev(3);
  BOOST_TEST(!ev.started());
  auto first = ev.piece(piece("caf\xc3"));
  BOOST_TEST(ev.started());
  BOOST_TEST(first.rfind("event: stdout\n", 0) == 0u);
  BOOST_TEST(data_of(first)["data"] == "caf");
  BOOST_TEST(data_of(first)["base64"] == false);
  auto second = ev.piece(piece("\xa9!\n"));
  BOOST_TEST(data_of(second)["data"] == "\xc3\xa9!\n");
  // A piece that is only the start of a character waits.
  BOOST_TEST(ev.piece(piece("\xe2\x82")).empty());
}

BOOST_AUTO_TEST_CASE(bytes_come_as_base64_and_stderr_as_its_own_event) {
  output_events ev(3);
  auto raw = ev.piece(piece(std::string("\xff\x00", 2)));
  BOOST_TEST(data_of(raw)["base64"] == true);
  BOOST_TEST(data_of(raw)["data"] == "/wA=");
  auto err = ev.piece(piece("oops\n", true));
  BOOST_TEST(err.rfind("event: stderr\n", 0) == 0u);
}

BOOST_AUTO_TEST_CASE(finish_sends_what_the_pieces_did_not_then_the_result) {
  output_events ev(3);
  ev.piece(piece("ab\xc3"));
  exec_result r;
  r.stdout_data = "ab\xc3\xa9 and more";
  r.stderr_data = "late\n";
  const std::string text = ev.finish(r, R"({"v":1})");
  // stdout from after "ab" (the held byte included), stderr whole, result last.
  const auto out = text.find("event: stdout\ndata: ");
  const auto err = text.find("event: stderr\ndata: ");
  const auto res = text.find("event: result\ndata: {\"v\":1}\n\n");
  BOOST_TEST(out < err);
  BOOST_TEST(err < res);
  BOOST_TEST(text.substr(res) == "event: result\ndata: {\"v\":1}\n\n");
  BOOST_TEST(data_of(text.substr(out))["data"] == "\xc3\xa9 and more");
  BOOST_TEST(data_of(text.substr(err))["data"] == "late\n");
  // Nothing left over: only the result.
  output_events done(3);
  BOOST_TEST(done.finish(exec_result{}, "{}") == "event: result\ndata: {}\n\n");
}

BOOST_AUTO_TEST_SUITE_END()
