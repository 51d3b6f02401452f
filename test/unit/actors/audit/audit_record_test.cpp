#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/audit/audit_record.hpp"
#include "actors/audit/rfc3339.hpp"
#include "actors/messages.hpp"
#include "audit_test_support.hpp"

using namespace castellan;
using nlohmann::json;

namespace {

json parse(const audit_record& rec) {
  BOOST_REQUIRE(rec.json.find('\n') == std::string::npos);
  auto j = json::parse(rec.json);
  BOOST_REQUIRE(j.is_object());
  return j;
}

// The head every record starts with, in this order.
void check_head(const std::string& line, const char* kind, uint64_t seq) {
  auto j = json::parse(line);
  BOOST_TEST(j["v"] == 1);
  BOOST_TEST(j["kind"] == kind);
  BOOST_TEST(j["seq"] == seq);
  int64_t ns = 0;
  BOOST_TEST(parse_rfc3339(j["ts"].get<std::string>(), ns));
  BOOST_TEST(line.rfind("{\"v\":1,\"ts\":\"", 0) == 0, line);
}

} // namespace

BOOST_AUTO_TEST_SUITE(audit_schema)

BOOST_AUTO_TEST_CASE(rfc3339_formats_and_parses_with_nanoseconds) {
  const int64_t ns = 1'763'769'241'123'456'789;
  BOOST_TEST(format_rfc3339(ns) == "2025-11-21T23:54:01.123456789Z");
  int64_t back = 0;
  BOOST_REQUIRE(parse_rfc3339(format_rfc3339(ns), back));
  BOOST_TEST(back == ns);
  BOOST_REQUIRE(parse_rfc3339("2025-11-22T01:54:01.5+02:00", back));
  BOOST_TEST(back == 1'763'769'241'500'000'000);
  BOOST_TEST(format_rfc3339(0) == "1970-01-01T00:00:00.000000000Z");
  for (const char* bad : {"2025-11-21", "2025-11-21T23:54:01", "2025-13-01T00:00:00Z",
                          "2025-11-21T23:54:01.Z", "2025-11-21T23:54:01Zjunk"})
    BOOST_TEST(!parse_rfc3339(bad, back), bad);
}

BOOST_AUTO_TEST_CASE(exec_start_fields) {
  auto rec = encode(test::sample_started(), 7, 1);
  check_head(rec.json, "exec_start", 7);
  auto j = parse(rec);
  BOOST_TEST(j["ts"] == "2025-11-21T23:54:01.123456789Z");
  BOOST_TEST(j["exec_id"] == 42);
  BOOST_TEST(j["pool"] == "default");
  BOOST_TEST(j["worker_id"] == 3);
  BOOST_TEST(j["policy"] == "strict");
  BOOST_TEST(j["policy_revision"] == 4);
  BOOST_TEST(j["mode"] == "code");
  BOOST_TEST(j["code_sha256"] == std::string(64, 'a'));
  BOOST_TEST(j["code_size"] == 17);
  BOOST_TEST(!j.contains("argv"));
  // An exec of the embedding program: no origin, no request setup.
  BOOST_TEST(j["origin"].is_null());
  BOOST_TEST(j["env_names"] == json::array());
  BOOST_TEST(j["cwd"] == "");
  BOOST_TEST(j["stdin_size"] == 0);
  // One through the API: who asked, and the names (never the values) of
  // the variables it set.
  auto api = test::sample_started();
  api.origin = {"tcp 127.0.0.1:40000", "ci"};
  api.env_names = {"LANG", "API_KEY"};
  api.cwd = "/tmp/work";
  api.stdin_size = 600;
  auto ja = parse(encode(api, 9, 1));
  BOOST_TEST(ja["origin"] == json({{"peer", "tcp 127.0.0.1:40000"}, {"token", "ci"}}));
  BOOST_TEST(ja["env_names"] == json::array({"LANG", "API_KEY"}));
  BOOST_TEST(ja["cwd"] == "/tmp/work");
  BOOST_TEST(ja["stdin_size"] == 600);
  api.origin = {"unix uid=0 gid=0 pid=7", ""};
  BOOST_TEST(parse(encode(api, 10, 1))["origin"] ==
             json({{"peer", "unix uid=0 gid=0 pid=7"}, {"token", nullptr}}));
  // What a client sent is bounded like anything else from outside.
  api.cwd = "/" + std::string(10000, 'd');
  api.env_names.assign(1000, "X");
  auto jb = parse(encode(api, 11, 1));
  BOOST_TEST(jb["cwd"].get<std::string>().size() < 4200u);
  BOOST_TEST(jb["env_names"].size() <= 257u);
  auto cmd = test::sample_started();
  cmd.argv = {"/bin/ls", "-l"};
  auto jc = parse(encode(cmd, 8, 1));
  BOOST_TEST(jc["mode"] == "command");
  BOOST_TEST(jc["argv"] == json::array({"/bin/ls", "-l"}));
}

BOOST_AUTO_TEST_CASE(exec_end_and_its_always_on_classes) {
  const std::pair<error_class, const char*> cases[] = {
      {error_class::ok, "exec_end"},
      {error_class::exception, "exec_end"},
      {error_class::policy_kill, "exec_end"},
      {error_class::timeout, "timeout"},
      {error_class::oom, "oom"},
      {error_class::worker_lost, "worker_lost"},
  };
  for (const auto& [cls, kind] : cases) {
    auto rec = encode(test::sample_finished(cls), 1, 1);
    BOOST_TEST(kind_name(rec.kind) == kind);
    auto j = parse(rec);
    BOOST_TEST(j["kind"] == kind);
    BOOST_TEST(j["error"] == to_string(cls));
    BOOST_TEST(j["exit_code"] == (cls == error_class::timeout ? 124 : 0));
    BOOST_TEST(j["queue_us"] == 15);
    BOOST_TEST(j["run_us"] == 2500);
    BOOST_TEST(j["cpu_us"] == 2100);
    BOOST_TEST(j["peak_memory_bytes"] == 12 << 20);
    BOOST_TEST(j["detail"] == "detail text");
    BOOST_TEST(j["policy_revision"] == 4);
    BOOST_TEST(j["exec_id"] == 42);
    BOOST_TEST(j["worker_id"] == 3);
  }
}

BOOST_AUTO_TEST_CASE(security_events_fields) {
  for (const char* kind : {"syscall_denied", "policy_warning", "optimistic_violation"}) {
    auto rec = encode(test::sample_security(kind), 2, 1);
    check_head(rec.json, kind, 2);
    auto j = parse(rec);
    BOOST_TEST(j["syscall"] == "openat");
    BOOST_TEST(j["target"] == "/etc/shadow");
    BOOST_TEST(j["rule"] == "/fs/rules/0");
    BOOST_TEST(j["pid"] == 77);
    BOOST_TEST(j["policy"] == "strict");
    BOOST_TEST(j["exec_id"] == 42);
    BOOST_TEST(!j.contains("event_kind"));
  }
  auto j = parse(encode(test::sample_security("novel_kind"), 3, 1));
  BOOST_TEST(j["kind"] == "policy_event");
  BOOST_TEST(j["event_kind"] == "200"); // its number: no name is known here
}

BOOST_AUTO_TEST_CASE(worker_lost_policy_rejected_connection_drop_report_fields) {
  auto lost = parse(encode(test::sample_lost(), 4, 1));
  BOOST_TEST(lost["kind"] == "worker_lost");
  BOOST_TEST(lost["pid"] == 1234);
  BOOST_TEST(lost["exec_id"] == 0);
  BOOST_TEST(lost["reason"] == "killed by signal 9");

  auto rej = parse(encode(test::sample_rejection(), 5, 1));
  BOOST_TEST(rej["kind"] == "policy_rejected");
  BOOST_TEST(rej["policy"] == "broken");
  BOOST_TEST(rej["path"] == "/etc/castellan/broken.json");
  BOOST_TEST(rej["errors"].size() == 2u);
  BOOST_TEST(rej["errors"][1] == "/net/rules/1/port: 70000 > 65535");

  auto con = parse(encode(test::sample_connection(), 6, 1));
  BOOST_TEST(con["kind"] == "connection");
  BOOST_TEST(con["host"] == "pypi.org");
  BOOST_TEST(con["address"] == "151.101.0.223");
  BOOST_TEST(con["port"] == 443);
  BOOST_TEST(con["decision"] == "allow");
  BOOST_TEST(con["bytes_out"] == 512);
  BOOST_TEST(con["bytes_in"] == 40960);
  BOOST_TEST(con["duration_us"] == 120000);

  auto drop = parse(encode_drop_report("subscriber:12", 5, 9, 7, 1'763'769'241'000'000'000));
  BOOST_TEST(drop["kind"] == "drop_report");
  BOOST_TEST(drop["sink"] == "subscriber:12");
  BOOST_TEST(drop["dropped"] == 5);
  BOOST_TEST(drop["dropped_total"] == 9);
  BOOST_TEST(drop["ts"] == "2025-11-21T23:54:01.000000000Z");
}

BOOST_AUTO_TEST_CASE(a_zero_timestamp_is_stamped_with_now) {
  auto x = test::sample_lost();
  x.timestamp_ns = 0;
  auto rec = encode(x, 1, 1'000'000'000);
  BOOST_TEST(rec.timestamp_ns == 1'000'000'000);
  BOOST_TEST(parse(rec)["ts"] == "1970-01-01T00:00:01.000000000Z");
}

BOOST_AUTO_TEST_CASE(hostile_strings_stay_bounded_and_valid) {
  auto x = test::sample_security("syscall_denied");
  x.event.target = std::string(100000, 'x') + "\xff\xfe\n\"";
  x.event.syscall = "open\xc3\x28"; // invalid UTF-8
  auto rec = encode(x, 1, 1);
  BOOST_TEST(rec.json.size() < 2 * audit_max_field_bytes);
  auto j = parse(rec);
  BOOST_TEST(j["target"].get<std::string>().find("bytes truncated") != std::string::npos);
  auto cmd = test::sample_started();
  cmd.argv.assign(1000, "arg");
  auto jc = parse(encode(cmd, 1, 1));
  BOOST_TEST(jc["argv"].size() == audit_max_list_entries + 1);
}

BOOST_AUTO_TEST_CASE(subscriber_filter_matches) {
  auto rec = encode(test::sample_security("syscall_denied"), 1, 1);
  BOOST_TEST(matches({}, rec));
  BOOST_TEST(matches({{"syscall_denied"}, 0, ""}, rec));
  BOOST_TEST(!matches({{"exec_start"}, 0, ""}, rec));
  BOOST_TEST(matches({{}, 42, "default"}, rec));
  BOOST_TEST(!matches({{}, 43, ""}, rec));
  BOOST_TEST(!matches({{}, 0, "other"}, rec));
  auto e = to_entry(rec);
  BOOST_TEST(e.kind == "syscall_denied");
  BOOST_TEST(e.exec_id == 42u);
  BOOST_TEST(e.json == rec.json);
}

BOOST_AUTO_TEST_CASE(fsync_policy_names) {
  for (auto p : {fsync_policy::never, fsync_policy::interval, fsync_policy::every_record}) {
    fsync_policy back = fsync_policy::never;
    BOOST_REQUIRE(from_string(to_string(p), back));
    BOOST_TEST((back == p));
  }
  fsync_policy out;
  BOOST_TEST(!from_string("sometimes", out));
}

namespace {

template <class T> T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(x));
  T back;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(back));
  return back;
}

struct system_fixture {
  static caf::actor_system_config& init(caf::actor_system_config& c) {
    prepare_actor_system_config(c);
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys{init(cfg)};
};

} // namespace

BOOST_FIXTURE_TEST_CASE(messages_survive_binary_serialization, system_fixture) {
  // What crosses nodes must come back identical: compare the encodings.
  BOOST_TEST(encode(round_trip(sys, test::sample_started()), 1, 1).json ==
             encode(test::sample_started(), 1, 1).json);
  BOOST_TEST(encode(round_trip(sys, test::sample_finished(error_class::oom)), 1, 1).json ==
             encode(test::sample_finished(error_class::oom), 1, 1).json);
  BOOST_TEST(encode(round_trip(sys, test::sample_security("policy_warning")), 1, 1).json ==
             encode(test::sample_security("policy_warning"), 1, 1).json);
  BOOST_TEST(encode(round_trip(sys, test::sample_lost()), 1, 1).json ==
             encode(test::sample_lost(), 1, 1).json);
  BOOST_TEST(encode(round_trip(sys, test::sample_rejection()), 1, 1).json ==
             encode(test::sample_rejection(), 1, 1).json);
  BOOST_TEST(encode(round_trip(sys, test::sample_connection()), 1, 1).json ==
             encode(test::sample_connection(), 1, 1).json);
  audit_config ac;
  ac.enabled = true;
  ac.events = {"exec_start", "openat"};
  ac.file.path = "/var/log/castellan/audit.jsonl";
  ac.file.fsync = fsync_policy::every_record;
  ac.file.max_files = 9;
  auto c = round_trip(sys, ac);
  BOOST_TEST(c.events == ac.events);
  BOOST_TEST(c.file.path == ac.file.path);
  BOOST_TEST((c.file.fsync == fsync_policy::every_record));
  BOOST_TEST(c.file.max_files == 9u);
  auto f = round_trip(sys, audit_filter{{"oom"}, 5, "p"});
  BOOST_TEST(f.kinds.count("oom") == 1u);
  BOOST_TEST(f.exec_id == 5u);
  auto e = round_trip(sys, to_entry(encode(test::sample_lost(), 3, 1)));
  BOOST_TEST(e.seq == 3u);
  BOOST_TEST(e.kind == "worker_lost");
  audit_stats s;
  s.recorded = 10;
  s.last_error = "x";
  BOOST_TEST(round_trip(sys, s).recorded == 10u);
}

BOOST_AUTO_TEST_CASE(policy_rejected_converts_generically) {
  struct policy_rejected { // the policy actor's message, same fields
    std::string policy_name;
    std::string path;
    std::vector<std::string> errors;
    int64_t timestamp_ns;
  };
  auto r = make_policy_rejection(policy_rejected{"p", "/x.json", {"/a: bad"}, 5});
  BOOST_TEST(r.policy_name == "p");
  BOOST_TEST(r.errors.size() == 1u);
  BOOST_TEST(r.timestamp_ns == 5);
}

BOOST_AUTO_TEST_SUITE_END()
