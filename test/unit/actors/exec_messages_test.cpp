#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(exec_messages)

BOOST_AUTO_TEST_CASE(error_class_names_round_trip) {
  for (auto cls : {error_class::ok, error_class::exception, error_class::timeout,
                   error_class::cancelled, error_class::limit_exceeded, error_class::policy_kill,
                   error_class::oom, error_class::worker_lost, error_class::busy}) {
    error_class back = error_class::ok;
    BOOST_REQUIRE(from_string(to_string(cls), back));
    BOOST_TEST((back == cls));
  }
  error_class out;
  BOOST_TEST(!from_string("fine", out));
  BOOST_TEST(to_string(error_class::limit_exceeded) == "limit_exceeded");
}

BOOST_FIXTURE_TEST_CASE(results_survive_binary_serialization, test::actor_system_fixture) {
  // What crosses nodes must come back identical.
  exec_result r;
  r.exec_id = 42;
  r.exit_code = -3;
  r.error = error_class::policy_kill;
  r.stdout_data = std::string("out\0put", 7);
  r.stderr_data = "err";
  r.stdout_truncated = true;
  r.has_exception = true;
  r.exception = {"ValueError", "x", "Traceback"};
  r.events.push_back({event_kind::optimistic_violation, "openat", "/etc/shadow",
                      event_decision::kill, "/fs/rules/2", 7, 99});
  r.timing = {11, 22};
  r.usage = {33, 44};
  r.worker_id = 5;
  r.detail = "d";
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(r));
  exec_result back;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(back));
  BOOST_TEST(dump_json(to_json(back)) == dump_json(to_json(r)));
  BOOST_TEST(back.events.at(0).rule == "/fs/rules/2");
  BOOST_TEST((back.events.at(0).kind == event_kind::optimistic_violation));
  BOOST_TEST((back.events.at(0).decision == event_decision::kill));
  BOOST_TEST(to_json(back)["events"][0]["kind"] == "optimistic_violation");
  BOOST_TEST(to_json(back)["events"][0]["decision"] == "kill");
}

BOOST_AUTO_TEST_CASE(json_has_every_documented_field) {
  exec_result r;
  r.stdout_data = "\xff\xfe not utf-8";
  auto j = to_json(r);
  for (const char* key : {"exit_code", "error_class", "stdout", "stderr", "stdout_base64",
                          "stderr_base64", "stdout_truncated", "stderr_truncated", "exception",
                          "events", "timing", "usage"})
    BOOST_TEST(j.contains(key), key);
  BOOST_TEST(j["exception"].is_null());
  BOOST_TEST(j["timing"].contains("queue_us"));
  // Arbitrary bytes never make serialisation throw: they come as base64.
  BOOST_TEST(j["stdout_base64"] == true);
  BOOST_TEST(dump_json(j).find(base64_encode(r.stdout_data)) != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
