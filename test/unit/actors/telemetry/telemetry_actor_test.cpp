#include <boost/test/unit_test.hpp>

#include <caf/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/telemetry/telemetry_actor.hpp"
#include "exposition_validator.hpp"

using namespace castellan;
using namespace std::chrono_literals;
namespace mn = castellan::metric_names;

namespace {

struct telemetry_fixture {
  static caf::actor_system_config& init(caf::actor_system_config& c) {
    prepare_actor_system_config(c);
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  telemetry_actor tel;

  telemetry_fixture() : sys(init(cfg)), self(sys), tel(spawn_telemetry(sys)) {}
  ~telemetry_fixture() { caf::anon_send_exit(tel, caf::exit_reason::user_shutdown); }

  template <class Atom> std::string ask(Atom atom) {
    std::string out;
    bool got = false;
    self->request(tel, 10s, atom)
        .receive(
            [&](std::string& s) {
              out = std::move(s);
              got = true;
            },
            [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
    BOOST_REQUIRE(got);
    return out;
  }
};

template <class T> T round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(x));
  T back;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(back));
  return back;
}

} // namespace

BOOST_AUTO_TEST_SUITE(telemetry_actor_tests)

BOOST_FIXTURE_TEST_CASE(observations_become_metrics_and_a_summary, telemetry_fixture) {
  for (uint64_t i = 0; i < 10; ++i)
    self->send(tel, exec_observation{"default", i < 9 ? error_class::ok : error_class::oom, i,
                                     1000 * (i + 1)});
  pool_status ps;
  ps.name = "default";
  ps.size = 4;
  ps.idle = 3;
  ps.busy = 1;
  ps.queue_limit = 16;
  self->send(tel, ps);
  self->send(tel, counter_increment{mn::worker_spawns, {{"pool", "default"}}, 4});
  self->send(tel, mediated_syscall{"default", "deny", 12000});
  self->send(tel, worker_usage{"default", 7, 1 << 20, 2000000});
  self->send(tel, ring_fill{"default", "from_worker", 10, 100});
  self->send(tel, worker_retired{"default", 99}); // unknown worker: harmless
  const auto text = ask(metrics_atom::value);
  const auto p = test::parse_exposition(text);
  BOOST_TEST_REQUIRE(p.valid(), text);
  BOOST_TEST(*p.value(mn::execs, {{"pool", "default"}, {"error_class", "ok"}}) == 9);
  BOOST_TEST(*p.value(mn::execs, {{"pool", "default"}, {"error_class", "oom"}}) == 1);
  BOOST_TEST(*p.value(std::string(mn::exec_duration) + "_count", {{"pool", "default"}}) == 10);
  BOOST_TEST(*p.value(std::string(mn::exec_duration) + "_sum", {{"pool", "default"}}) == 0.055);
  BOOST_TEST(*p.value(mn::pool_workers, {{"pool", "default"}, {"state", "idle"}}) == 3);
  BOOST_TEST(*p.value(mn::worker_spawns, {{"pool", "default"}}) == 4);
  BOOST_TEST(*p.value(mn::mediated_syscalls, {{"pool", "default"}, {"decision", "deny"}}) == 1);
  BOOST_TEST(*p.value(mn::worker_cpu, {{"pool", "default"}, {"worker", "7"}}) == 2);
  BOOST_TEST(*p.value(mn::ring_fill, {{"pool", "default"}, {"ring", "from_worker"}}) == 0.1);
  const auto summary = ask(summary_atom::value);
  BOOST_TEST(summary.find("execs     10 (ok 9, oom 1)") == 0u, summary);
  BOOST_TEST(
      summary.find("pool      default: 4 workers (3 idle, 1 busy, 0 starting), queue 0/16") !=
          std::string::npos,
      summary);
  bool got = false;
  self->request(tel, 10s, summary_data_atom::value)
      .receive(
          [&](const telemetry_summary& s) {
            got = true;
            BOOST_TEST(s.execs == 10u);
            BOOST_TEST(s.execs_by_class.at("oom") == 1u);
            BOOST_TEST(s.workers_spawned == 4u);
            BOOST_TEST(s.syscalls_mediated == 1u);
          },
          [&](const caf::error& err) { BOOST_FAIL(caf::to_string(err)); });
  BOOST_TEST(got);
  // It crosses nodes like every message.
  telemetry_summary t;
  t.execs = 3;
  t.execs_by_class = {{"ok", 3}};
  t.run.p99_us = 7;
  auto back = round_trip(sys, t);
  BOOST_TEST(back.execs == 3u);
  BOOST_TEST(back.execs_by_class.at("ok") == 3u);
  BOOST_TEST(back.run.p99_us == 7u);
}

BOOST_FIXTURE_TEST_CASE(observations_survive_binary_serialization, telemetry_fixture) {
  auto e = round_trip(sys, exec_observation{"p", error_class::timeout, 5, 6});
  BOOST_TEST(e.pool == "p");
  BOOST_TEST((e.error == error_class::timeout));
  BOOST_TEST(e.run_us == 6u);
  auto c = round_trip(sys, counter_increment{"x_total", {{"a", "1"}, {"b", "2"}}, 3});
  BOOST_TEST(c.labels.size() == 2u);
  BOOST_TEST(c.labels.at("b") == "2");
  BOOST_TEST(c.value == 3u);
  BOOST_TEST(round_trip(sys, worker_usage{"p", 1, 2, 3}).cpu_us == 3u);
  BOOST_TEST(round_trip(sys, worker_retired{"p", 9}).worker_id == 9u);
  BOOST_TEST(round_trip(sys, mediated_syscall{"p", "warn", 77}).latency_ns == 77u);
  BOOST_TEST(round_trip(sys, ring_fill{"p", "to_worker", 1, 2}).ring == "to_worker");
}

BOOST_AUTO_TEST_SUITE_END()
