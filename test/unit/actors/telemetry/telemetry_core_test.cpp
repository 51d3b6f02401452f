#include <boost/test/unit_test.hpp>

#include "actors/telemetry/prometheus_exposition.hpp"
#include "actors/telemetry/telemetry_core.hpp"
#include "exposition_validator.hpp"
#include "telemetry_test_support.hpp"

using namespace castellan;
namespace mn = castellan::metric_names;

namespace {

std::string errors_of(const test::parsed_exposition& p) {
  std::string out;
  for (const auto& e : p.errors)
    out += e + "\n";
  return out;
}

// Checks a histogram series against the raw observations it was fed.
void check_histogram(const test::parsed_exposition& p, const std::string& name,
                     const test::label_map& labels, const std::vector<uint64_t>& obs_us) {
  uint64_t sum = 0;
  for (auto us : obs_us)
    sum += us;
  BOOST_TEST(*p.value(name + "_count", labels) == obs_us.size());
  BOOST_TEST(*p.value(name + "_sum", labels) == std::stod(format_us_as_seconds(sum)));
  double prev = 0;
  for (size_t i = 0; i < histogram::bucket_count; ++i) {
    auto l = labels;
    l["le"] = format_us_as_seconds(histogram::bound_us(i));
    double expected = 0;
    for (auto us : obs_us)
      expected += us <= histogram::bound_us(i) ? 1 : 0;
    const auto got = p.value(name + "_bucket", l);
    BOOST_REQUIRE(got);
    BOOST_TEST(*got == expected, name << " le=" << l["le"]);
    BOOST_TEST(*got >= prev); // cumulative, monotone
    prev = *got;
  }
  auto inf = labels;
  inf["le"] = "+Inf";
  BOOST_TEST(*p.value(name + "_bucket", inf) == obs_us.size());
}

} // namespace

BOOST_AUTO_TEST_SUITE(telemetry_core_tests)

BOOST_AUTO_TEST_CASE(figures_match_what_was_observed) {
  telemetry_core core;
  const auto f = test::feed(core, 5000);
  const auto text = core.exposition();
  const auto p = test::parse_exposition(text);
  BOOST_TEST_REQUIRE(p.valid(), errors_of(p) << text);

  BOOST_TEST(*p.value(mn::execs, {{"pool", "p"}, {"error_class", "ok"}}) == f.ok);
  BOOST_TEST(*p.value(mn::execs, {{"pool", "p"}, {"error_class", "timeout"}}) == f.timeout);
  BOOST_TEST(*p.value(mn::execs, {{"pool", "p"}, {"error_class", "busy"}}) == f.busy);
  check_histogram(p, mn::exec_duration, {{"pool", "p"}}, f.run_us);
  check_histogram(p, mn::exec_queue_wait, {{"pool", "p"}}, f.queue_us);

  BOOST_TEST(*p.value(mn::pool_size, {{"pool", "p"}}) == 8);
  BOOST_TEST(*p.value(mn::pool_workers, {{"pool", "p"}, {"state", "idle"}}) == 5);
  BOOST_TEST(*p.value(mn::pool_workers, {{"pool", "p"}, {"state", "busy"}}) == 2);
  BOOST_TEST(*p.value(mn::pool_workers, {{"pool", "p"}, {"state", "starting"}}) == 1);
  BOOST_TEST(*p.value(mn::pool_queue_length, {{"pool", "p"}}) == 3);
  BOOST_TEST(*p.value(mn::pool_queue_limit, {{"pool", "p"}}) == 64);

  BOOST_TEST(*p.value(mn::worker_spawns, {{"pool", "p"}}) == 3);
  BOOST_TEST(*p.value(mn::worker_kills, {{"pool", "p"}}) == 1);
  BOOST_TEST(*p.value(mn::worker_recycles, {{"pool", "p"}}) == 2);

  BOOST_TEST(*p.value(mn::mediated_syscalls, {{"pool", "p"}, {"decision", "allow"}}) == 40);
  BOOST_TEST(*p.value(mn::mediated_syscalls, {{"pool", "p"}, {"decision", "deny"}}) == 10);
  std::vector<uint64_t> syscall_us;
  for (auto ns : f.syscall_ns)
    syscall_us.push_back((ns + 999) / 1000); // recorded in whole µs, rounded up
  check_histogram(p, mn::mediated_latency, {{"pool", "p"}}, syscall_us);

  BOOST_TEST(*p.value(mn::worker_memory, {{"pool", "p"}, {"worker", "1"}}) == 50 << 20);
  BOOST_TEST(*p.value(mn::worker_cpu, {{"pool", "p"}, {"worker", "1"}}) == 1.5);
  BOOST_TEST(*p.value(mn::worker_cpu, {{"pool", "p"}, {"worker", "2"}}) == 0.00025);
  BOOST_TEST(*p.value(mn::ring_fill, {{"pool", "p"}, {"ring", "to_worker"}}) == 0.125);
  BOOST_TEST(*p.value(mn::ring_fill_max, {{"pool", "p"}, {"ring", "to_worker"}}) == 0.25);
  BOOST_TEST(*p.value(mn::ring_fill_max, {{"pool", "p"}, {"ring", "from_worker"}}) == 1);
  BOOST_TEST(*p.value(mn::refused) == 0);
}

BOOST_AUTO_TEST_CASE(retired_workers_leave_the_exposition) {
  telemetry_core core;
  core.apply(worker_usage{"p", 1, 100, 100});
  core.apply(worker_usage{"p", 2, 200, 200});
  core.apply(worker_retired{"p", 1});
  const auto p = test::parse_exposition(core.exposition());
  BOOST_REQUIRE(p.valid());
  BOOST_TEST(!p.value(mn::worker_memory, {{"pool", "p"}, {"worker", "1"}}));
  BOOST_TEST(!p.value(mn::worker_cpu, {{"pool", "p"}, {"worker", "1"}}));
  BOOST_TEST(*p.value(mn::worker_memory, {{"pool", "p"}, {"worker", "2"}}) == 200);
}

BOOST_AUTO_TEST_CASE(counter_increments_accept_new_counters_and_refuse_garbage) {
  telemetry_core core;
  BOOST_TEST(core.apply(
      counter_increment{"castellan_proxy_connections_total", {{"decision", "deny"}}, 4}));
  BOOST_TEST(!core.apply(counter_increment{"not a name", {}, 1}));
  BOOST_TEST(!core.apply(counter_increment{"castellan_pool_size", {}, 1})); // a gauge
  BOOST_TEST(!core.apply(counter_increment{"castellan_spawns", {}, 1}));    // no _total
  BOOST_TEST(!core.apply(counter_increment{mn::worker_spawns, {{"bad-label", "x"}}, 1}));
  const auto p = test::parse_exposition(core.exposition());
  BOOST_TEST_REQUIRE(p.valid(), errors_of(p));
  BOOST_TEST(*p.value("castellan_proxy_connections_total", {{"decision", "deny"}}) == 4);
  BOOST_TEST(*p.value(mn::refused) == 4);
}

BOOST_AUTO_TEST_CASE(the_summary_is_a_few_lines_with_the_figures) {
  telemetry_core core;
  test::feed(core, 10000); // every observation within the first second
  const auto s = core.summary(12000);
  BOOST_TEST_MESSAGE("summary:\n" << s);
  size_t lines = 0;
  for (char c : s)
    lines += c == '\n' ? 1 : 0;
  BOOST_TEST(lines == 6u);
  BOOST_TEST(s.find("execs     100 (busy 2, ok 90, timeout 8), 50.0/s\n") != std::string::npos, s);
  BOOST_TEST(s.find("latency   run p50 32.8ms p90 131.1ms p99 131.1ms; queue p50 256us") !=
                 std::string::npos,
             s);
  BOOST_TEST(s.find("pool      p: 8 workers (5 idle, 2 busy, 1 starting), queue 3/64\n") !=
                 std::string::npos,
             s);
  BOOST_TEST(s.find("workers   spawned 3, killed 1, recycled 2\n") != std::string::npos, s);
  BOOST_TEST(s.find("syscalls  mediated 50, 25.0/s, latency p50 32us") != std::string::npos, s);
  BOOST_TEST(s.find("audit     records 0, dropped 0\n") != std::string::npos, s);
  // An empty registry still summarises.
  telemetry_core empty;
  BOOST_TEST(empty.summary(0).find("execs     0, 0.0/s") == 0u);
}

BOOST_AUTO_TEST_CASE(the_summary_figures_are_numbers_too) {
  telemetry_core core;
  test::feed(core, 10000);
  const telemetry_summary s = core.summarize(12000);
  BOOST_TEST(s.execs == 100u);
  BOOST_TEST((s.execs_by_class == std::map<std::string, uint64_t>{
                                      {"busy", 2}, {"ok", 90}, {"timeout", 8}}));
  BOOST_TEST(s.execs_per_second == 50.0);
  BOOST_TEST(s.run.p50_us == 32768u);
  BOOST_TEST(s.run.p90_us == 131072u);
  BOOST_TEST(s.queue.p50_us == 256u);
  BOOST_TEST(s.workers_spawned == 3u);
  BOOST_TEST(s.workers_killed == 1u);
  BOOST_TEST(s.workers_recycled == 2u);
  BOOST_TEST(s.syscalls_mediated == 50u);
  BOOST_TEST(s.syscalls_per_second == 25.0);
  BOOST_TEST(s.syscall_latency.p50_us == 32u);
  BOOST_TEST(s.audit_records == 0u);
  // The text is made of the same figures.
  BOOST_TEST(core.summary(12000).find("execs     100 (busy 2, ok 90, timeout 8), 50.0/s\n") == 0u);
  const telemetry_summary empty = telemetry_core{}.summarize(0);
  BOOST_TEST(empty.execs == 0u);
  BOOST_TEST(empty.execs_by_class.empty());
}

BOOST_AUTO_TEST_CASE(rates_cover_the_last_ten_seconds) {
  rate_meter m;
  BOOST_TEST(m.per_second(0) == 0.0);
  for (int s = 0; s < 30; ++s)
    m.add(10, s * 1000 + 500);
  BOOST_TEST(m.per_second(29900) == 10.0);
  BOOST_TEST(m.per_second(45000) == 0.0); // everything is older than the window
}

BOOST_AUTO_TEST_SUITE_END()
