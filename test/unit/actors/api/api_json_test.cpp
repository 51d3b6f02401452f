#include <boost/test/unit_test.hpp>

#include <string>
#include <variant>
#include <vector>

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

/// What the encoder wrote before it wrote the common members itself: the
/// report as dump_json writes it, first, then the rest of result_body's
/// object through nlohmann.
std::string spliced(exec_result r, std::string_view id) {
  const json report = json::parse(r.enforcement, nullptr, false);
  const std::string head = dump_json(report.is_discarded() ? json(r.enforcement) : report);
  r.enforcement.clear();
  json j = to_json(r);
  j.erase("enforcement");
  j["v"] = 1;
  if (!id.empty())
    j["id"] = id;
  const std::string rest = dump_json(j);
  return R"({"enforcement":)" + head + "," + rest.substr(1);
}

BOOST_AUTO_TEST_CASE(the_encoder_writes_the_same_bytes_as_nlohmann) {
  // Every character nlohmann escapes, or does not; text that is not UTF-8
  // (replaced, or base64); output cut inside a character; the rarer
  // members (events, exception, files), which take nlohmann's path.
  std::string all_ascii;
  for (int c = 0; c < 0x80; ++c)
    all_ascii += static_cast<char>(c);
  std::vector<exec_result> results;
  for (const std::string& text :
       {std::string(), std::string("pass"), all_ascii, std::string("h\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"),
        std::string("bad \xff\xfe utf-8"), std::string("cut \xe2\x82")}) {
    exec_result r;
    r.exec_id = 18446744073709551615ull;
    r.exit_code = -9;
    r.error = error_class::worker_lost;
    r.stdout_data = text;
    r.stderr_data = text + "x";
    r.stdout_truncated = true;
    r.detail = text;
    r.timing = {12, 345};
    r.usage = {6, 7u << 20};
    r.worker_id = 3;
    results.push_back(r);
    r.stdout_truncated = false;
    r.stderr_truncated = true;
    r.error = error_class::ok;
    r.exit_code = 0;
    results.push_back(r);
  }
  auto with_event = results[1];
  with_event.events.push_back(policy_event{});
  results.push_back(with_event);
  auto with_exception = results[3];
  with_exception.has_exception = true;
  with_exception.exception = {"ValueError", "42", "Traceback…"};
  results.push_back(with_exception);
  auto with_file = results[2];
  with_file.files.push_back(exec_file_out{"/tmp/out", "abc", 3, "", ""});
  results.push_back(with_file);
  result_encoder enc;
  for (const std::string report : {R"({"mode":"shared","landlock":{"abi":7}})", "not json {"})
    for (std::size_t i = 0; i < results.size(); ++i)
      for (const std::string id : {"", "job-1"}) {
        BOOST_TEST_CONTEXT("result " << i << ", report '" << report << "', id '" << id << "'") {
          auto r = results[i];
          r.enforcement = report;
          BOOST_TEST(enc.body(r, id) == spliced(r, id));
          BOOST_TEST(r.enforcement == report); // left as it was
          BOOST_TEST(json::parse(enc.body(r, id)) == json::parse(result_body(r, id)));
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

/// The request `body` parses into, or fails the test.
exec_request parsed(const std::string& body) {
  auto p = parse_exec_body(body, false);
  if (auto* err = std::get_if<api_error>(&p))
    BOOST_FAIL("refused: " << err->message);
  return std::get<exec_body>(p).request;
}

/// The error `body` is refused with.
api_error refused(const std::string& body, bool command = false) {
  auto p = parse_exec_body(body, command);
  BOOST_REQUIRE(std::holds_alternative<api_error>(p));
  return std::get<api_error>(p);
}

BOOST_AUTO_TEST_CASE(stdin_env_and_cwd_are_read) {
  auto r = parsed(R"({"code":"x","stdin":"hi\n","env":{"A":"1","B":""},"cwd":"/w"})");
  BOOST_TEST(r.stdin_data == "hi\n");
  BOOST_TEST((r.env == std::vector<std::string>{"A=1", "B="}));
  BOOST_TEST(r.cwd == "/w");
  auto b = parsed(R"({"code":"x","stdin_base64":"/wAB"})");
  BOOST_TEST(b.stdin_data == std::string("\xff\x00\x01", 3));
  auto c = parse_exec_body(R"({"argv":["cat"],"stdin":"x"})", true);
  BOOST_TEST(std::get<exec_body>(c).request.stdin_data == "x");
}

BOOST_AUTO_TEST_CASE(bad_stdin_env_and_cwd_name_their_field) {
  BOOST_TEST(refused(R"({"code":"x","stdin":1})").field == "/stdin");
  BOOST_TEST(refused(R"({"code":"x","stdin":"a","stdin_base64":"YQ=="})").field ==
             "/stdin_base64");
  auto b64 = refused(R"({"code":"x","stdin_base64":"not base64!"})");
  BOOST_TEST(b64.field == "/stdin_base64");
  BOOST_TEST(b64.message.find("is not base64") != std::string::npos, b64.message);
  BOOST_TEST(refused(R"({"code":"x","env":["A=1"]})").field == "/env");
  BOOST_TEST(refused(R"({"code":"x","env":{"A":1}})").field == "/env/A");
  BOOST_TEST(refused(R"({"code":"x","env":{"A=B":"1"}})").field == "/env/A=B");
  BOOST_TEST(refused(R"({"code":"x","env":{"a/b~":"\u0000"}})").field == "/env/a~1b~0");
  BOOST_TEST(refused(R"({"code":"x","env":{"":"1"}})").field == "/env/");
  auto rel = refused(R"({"code":"x","cwd":"tmp"})");
  BOOST_TEST(rel.field == "/cwd");
  BOOST_TEST(rel.message == "cwd: 'tmp' is not an absolute path");
  BOOST_TEST(refused(R"({"code":"x","cwd":7})").field == "/cwd");
  BOOST_TEST(refused(R"({"code":"x","cwd":"/a\u0000b"})").field == "/cwd");
}

BOOST_AUTO_TEST_CASE(files_in_and_files_out_are_read) {
  auto r = parsed(R"({"code":"x","files_in":[{"path":"a.txt","content":"hi"},
                     {"path":"/tmp/b","content_base64":"/wAB","mode":384}],
                     "files_out":["out.txt","/tmp/o"]})");
  BOOST_REQUIRE(r.files_in.size() == 2u);
  BOOST_TEST(r.files_in[0].path == "a.txt");
  BOOST_TEST(r.files_in[0].content == "hi");
  BOOST_TEST(r.files_in[0].mode == 0644u);
  BOOST_TEST(r.files_in[1].content == std::string("\xff\x00\x01", 3));
  BOOST_TEST(r.files_in[1].mode == 0600u);
  BOOST_TEST((r.files_out == std::vector<std::string>{"out.txt", "/tmp/o"}));
}

BOOST_AUTO_TEST_CASE(bad_files_name_their_json_pointer) {
  BOOST_TEST(refused(R"({"code":"x","files_in":{}})").field == "/files_in");
  BOOST_TEST(refused(R"({"code":"x","files_in":[7]})").field == "/files_in/0");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"content":"a"}]})").field ==
             "/files_in/0/path");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"path":"a"}]})").field ==
             "/files_in/0/content");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"path":"a","content":"a",
                        "content_base64":"YQ=="}]})").field == "/files_in/0/content_base64");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"path":"a","content_base64":"!"}]})").field ==
             "/files_in/0/content_base64");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"path":"a","content":"a","mode":512}]})").field ==
             "/files_in/0/mode");
  BOOST_TEST(refused(R"({"code":"x","files_in":[{"path":"a","content":"a","owner":0}]})").field ==
             "/files_in/0/owner");
  auto dots = refused(R"({"code":"x","files_in":[{"path":"a","content":""},
                         {"path":"../etc/passwd","content":"a"}]})");
  BOOST_TEST(dots.field == "/files_in/1/path");
  BOOST_TEST(dots.message == "files_in[1].path: '../etc/passwd' has a '..' component");
  auto outside = refused(R"({"code":"x","files_out":["ok","/etc/shadow"]})");
  BOOST_TEST(outside.field == "/files_out/1");
  BOOST_TEST(outside.message == "files_out[1]: '/etc/shadow' is not below /tmp or the working "
                                "directory '/tmp'");
  BOOST_TEST(refused(R"({"code":"x","files_out":"a"})").field == "/files_out");
  BOOST_TEST(refused(R"({"code":"x","files_out":[1]})").field == "/files_out/0");
}

BOOST_AUTO_TEST_CASE(the_result_carries_files_only_when_asked) {
  exec_result r;
  BOOST_TEST(!json::parse(result_body(r)).contains("files"));
  exec_file_out text;
  text.path = "a";
  text.content = "hi";
  text.size = 2;
  exec_file_out binary;
  binary.path = "b";
  binary.content = std::string("\xff\x00", 2);
  binary.size = 2;
  exec_file_out missing;
  missing.path = "c";
  missing.error = "missing";
  missing.message = "no such file";
  r.files = {text, binary, missing};
  auto j = json::parse(result_body(r));
  BOOST_TEST(j["files"][0] == json({{"path", "a"}, {"size", 2}, {"content", "hi"}}));
  BOOST_TEST(j["files"][1] == json({{"path", "b"}, {"size", 2}, {"content_base64", "/wA="}}));
  BOOST_TEST(j["files"][2] == json({{"path", "c"},
                                    {"size", 0},
                                    {"error", "missing"},
                                    {"message", "no such file"}}));
  // And back, as the CLI reads a daemon's answer.
  auto back = result_from_json(j);
  BOOST_REQUIRE(back.has_value());
  BOOST_REQUIRE(back->files.size() == 3u);
  BOOST_TEST(back->files[1].content == binary.content);
  BOOST_TEST(back->files[2].error == "missing");
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(api_exec_ids)

BOOST_AUTO_TEST_CASE(a_client_id_is_read_and_checked) {
  auto ok = parse_exec_body(R"({"code":"1","id":"job-7.a_B"})", false);
  BOOST_REQUIRE(std::holds_alternative<exec_body>(ok));
  BOOST_TEST(std::get<exec_body>(ok).id == "job-7.a_B");
  BOOST_TEST(std::get<exec_body>(ok).request.code == "1");
  auto none = parse_exec_body(R"({"argv":["/bin/true"]})", true);
  BOOST_REQUIRE(std::holds_alternative<exec_body>(none));
  BOOST_TEST(std::get<exec_body>(none).id.empty());
  const std::string longest(max_exec_id_chars, 'x');
  BOOST_TEST(std::holds_alternative<exec_body>(
      parse_exec_body(json{{"code", "1"}, {"id", longest}}.dump(), false)));

  for (const json& bad : {json(""), json(longest + "x"), json("a/b"), json("a b"), json("é"),
                          json("12"), json("."), json(".."), json(7), json(nullptr)}) {
    BOOST_TEST_CONTEXT("id " << bad.dump()) {
      auto r = parse_exec_body(json{{"code", "1"}, {"id", bad}}.dump(), false);
      BOOST_REQUIRE(std::holds_alternative<api_error>(r));
      BOOST_TEST(std::get<api_error>(r).status == 400u);
      BOOST_TEST(std::get<api_error>(r).field == "/id");
    }
  }
  // Dots and digits are fine beside other characters.
  for (const char* good : {"...", "1.2", "0x1", "-1", "a"})
    BOOST_TEST(std::holds_alternative<exec_body>(
                   parse_exec_body(json{{"code", "1"}, {"id", good}}.dump(), false)),
               good);
}

BOOST_AUTO_TEST_CASE(the_result_carries_the_id_only_when_given) {
  result_encoder enc;
  auto r = sample(R"({"mode":"isolated"})");
  BOOST_TEST(json::parse(enc.body(r, "job"))["id"] == "job");
  BOOST_TEST(!json::parse(enc.body(r)).contains("id"));
  BOOST_TEST(json::parse(result_body(r, "job"))["id"] == "job");
  BOOST_TEST(!json::parse(result_body(r)).contains("id"));
}

BOOST_AUTO_TEST_CASE(a_cancel_reply_says_whether_it_cancelled) {
  cancel_reply c;
  c.exec_id = 9;
  c.outcome = cancel_outcome::cancelled_queued;
  BOOST_TEST(json::parse(cancel_body(c, "x")) ==
             json({{"v", 1}, {"exec_id", 9}, {"id", "x"}, {"cancelled", true},
                   {"outcome", "cancelled_queued"}}));
  c.outcome = cancel_outcome::already_finished;
  BOOST_TEST(json::parse(cancel_body(c, "")) == json({{"v", 1},
                                                      {"exec_id", 9},
                                                      {"cancelled", false},
                                                      {"outcome", "already_finished"}}));
}

BOOST_AUTO_TEST_SUITE_END()
