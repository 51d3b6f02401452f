/// @file main.cpp
/// bench_policy_check: how long a policy check takes, compiled snapshot
/// against the naive linear evaluator (the baseline), on one policy of 200
/// fs, 200 net and 200 exec rules and the same queries. Google Benchmark
/// times each pair; then a summary prints, per domain and for both engines,
/// checks/s and the median (p50) ns per check measured over batches, and the
/// ratio.

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/linear_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "support/percentiles.hpp"

namespace pol = castellan::policy;

namespace {

constexpr size_t rules_per_domain = 200;
constexpr size_t query_count = 4096;

struct fs_query {
  std::string path;
  pol::fs_access access;
};
struct net_query {
  pol::net_proto proto;
  pol::ip_address address;
  uint16_t port;
  std::string host;
};

/// The policy and the queries, generated once from a fixed seed.
struct workload {
  std::shared_ptr<const pol::compiled_policy> compiled;
  std::unique_ptr<pol::linear_policy> linear;
  std::vector<fs_query> fs;
  std::vector<net_query> net;
  std::vector<std::string> exec;
};

const char* pick_action(std::mt19937& rng) {
  static const char* a[] = {"allow", "allow", "allow", "warn", "deny"};
  return a[rng() % 5];
}

workload make_workload() {
  std::mt19937 rng{42};
  nlohmann::json p;
  p["version"] = 1;
  p["description"] = "bench_policy_check: 200 rules per domain";
  p["defaults"] = {{"fs", "deny"}, {"net", "deny"}, {"exec", "deny"}};
  // fs: the shapes real policies have: package trees, per-user globs,
  // recursive globs, single files.
  auto& fs = p["fs"]["rules"] = nlohmann::json::array();
  static const char* perms[][3] = {{"read_file", "read_dir", "execute"},
                                   {"read_file", "write_file", "truncate"},
                                   {"read_file", "read_dir", "write_dir"}};
  for (size_t i = 0; i < rules_per_domain; ++i) {
    std::string path;
    switch (i % 5) {
    case 0:
      path = "/usr/lib/python3.11/site-packages/pkg" + std::to_string(i);
      break;
    case 1:
      path = "/home/*/project" + std::to_string(i) + "/src";
      break;
    case 2:
      path = "/srv/app" + std::to_string(i) + "/**/*.json";
      break;
    case 3:
      path = "/var/log/service" + std::to_string(i);
      break;
    default:
      path = "/etc/app" + std::to_string(i) + ".conf";
    }
    const auto& pr = perms[i % 3];
    fs.push_back({{"action", pick_action(rng)}, {"path", path}, {"perms", {pr[0], pr[1], pr[2]}}});
  }
  // net: prefixes of every common length, both families, mixed ports.
  auto& net = p["net"]["rules"] = nlohmann::json::array();
  static const char* ports[] = {"0-65535", "443", "80,443", "8000-9000", "53", "22,25,3306"};
  for (size_t i = 0; i < rules_per_domain; ++i) {
    std::string cidr;
    const unsigned a = static_cast<unsigned>(i);
    switch (i % 6) {
    case 0:
      cidr = std::to_string(10 + a % 100) + ".0.0.0/8";
      break;
    case 1:
      cidr = "172." + std::to_string(16 + a % 16) + ".0.0/16";
      break;
    case 2:
      cidr = "192.168." + std::to_string(a % 256) + ".0/24";
      break;
    case 3:
      cidr = "203.0." + std::to_string(a % 256) + "." + std::to_string(a % 200) + "/32";
      break;
    case 4:
      cidr = "2001:db8:" + std::to_string(a % 9000) + "::/48";
      break;
    default:
      cidr = "fd00:" + std::to_string(a % 9000) + "::/32";
    }
    net.push_back({{"action", pick_action(rng)},
                   {"proto", i % 4 == 0 ? "udp" : "tcp"},
                   {"cidr", cidr},
                   {"ports", ports[i % 6]}});
  }
  // exec: explicit binaries and globbed tool directories.
  auto& ex = p["exec"]["rules"] = nlohmann::json::array();
  for (size_t i = 0; i < rules_per_domain; ++i) {
    const std::string path = i % 2 == 0 ? "/opt/tools" + std::to_string(i) + "/bin/*"
                                        : "/usr/local/bin/tool" + std::to_string(i);
    ex.push_back({{"action", pick_action(rng)}, {"path", path}});
  }

  auto doc = pol::parse_policy(p.dump(), "<bench>");
  if (!doc) {
    std::fprintf(stderr, "bench policy invalid: %s\n", doc.to_failure().describe().c_str());
    std::exit(1);
  }
  workload w;
  w.linear = std::make_unique<pol::linear_policy>(*doc);
  w.compiled = pol::compiled_policy::compile(std::move(*doc), "bench");

  // Queries: about half hit a rule, the rest fall to the default.
  // (prefix, suffix) around a number, so that some queries hit a rule.
  static const std::pair<const char*, const char*> fs_shapes[] = {
      {"/usr/lib/python3.11/site-packages/pkg", "/__init__.py"},
      {"/home/alice/project", "/src/main.py"},
      {"/srv/app", "/config/deep/settings.json"},
      {"/var/log/service", "/current"},
      {"/etc/app", ".conf"},
      {"/usr/lib/python3.11/os", ".py"},
      {"/tmp/scratch/file", ""},
      {"/home/bob/.ssh/id_rsa", ""},
  };
  const pol::fs_access accesses[] = {pol::to_access(pol::fs_perm::read_file),
                                     pol::to_access(pol::fs_perm::write_file),
                                     pol::to_access(pol::fs_perm::read_dir)};
  char buf[256];
  for (size_t i = 0; i < query_count; ++i) {
    const auto& shape = fs_shapes[rng() % 8];
    w.fs.push_back({std::string{shape.first} + std::to_string(rng() % 220) + shape.second,
                    accesses[rng() % 3]});
  }
  for (size_t i = 0; i < query_count; ++i) {
    net_query q;
    q.proto = rng() % 4 == 0 ? pol::net_proto::udp : pol::net_proto::tcp;
    switch (rng() % 5) {
    case 0:
      std::snprintf(buf, sizeof(buf), "%u.%u.1.2", 10 + static_cast<unsigned>(rng() % 120),
                    static_cast<unsigned>(rng() % 256));
      break;
    case 1:
      std::snprintf(buf, sizeof(buf), "172.%u.3.4", 16 + static_cast<unsigned>(rng() % 16));
      break;
    case 2:
      std::snprintf(buf, sizeof(buf), "192.168.%u.9", static_cast<unsigned>(rng() % 256));
      break;
    case 3:
      std::snprintf(buf, sizeof(buf), "2001:db8:%u::1", static_cast<unsigned>(rng() % 300));
      break;
    default:
      std::snprintf(buf, sizeof(buf), "93.184.%u.34", static_cast<unsigned>(rng() % 256));
    }
    q.address = *pol::parse_ip(buf);
    static const uint16_t qports[] = {443, 80, 53, 8080, 22, 5432};
    q.port = qports[rng() % 6];
    w.net.push_back(q);
  }
  for (size_t i = 0; i < query_count; ++i) {
    const size_t n = rng() % 220;
    w.exec.push_back(rng() % 2 == 0 ? "/opt/tools" + std::to_string(n) + "/bin/run"
                                    : "/usr/local/bin/tool" + std::to_string(n));
  }
  return w;
}

const workload& the_workload() {
  static const workload w = make_workload();
  return w;
}

// -- Google Benchmark: one benchmark per domain and engine --------------------

template <class Engine> void run_fs(benchmark::State& state, const Engine& e) {
  const auto& w = the_workload();
  size_t i = 0;
  for (auto _ : state) {
    const auto& q = w.fs[i++ % w.fs.size()];
    benchmark::DoNotOptimize(e.check_fs(q.path, q.access));
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Engine> void run_net(benchmark::State& state, const Engine& e) {
  const auto& w = the_workload();
  size_t i = 0;
  for (auto _ : state) {
    const auto& q = w.net[i++ % w.net.size()];
    benchmark::DoNotOptimize(e.check_net(q.proto, q.address, q.port));
  }
  state.SetItemsProcessed(state.iterations());
}

template <class Engine> void run_exec(benchmark::State& state, const Engine& e) {
  const auto& w = the_workload();
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(e.check_exec(w.exec[i++ % w.exec.size()]));
  }
  state.SetItemsProcessed(state.iterations());
}

void BM_fs_compiled(benchmark::State& s) {
  run_fs(s, *the_workload().compiled);
}
void BM_fs_linear(benchmark::State& s) {
  run_fs(s, *the_workload().linear);
}
void BM_net_compiled(benchmark::State& s) {
  run_net(s, *the_workload().compiled);
}
void BM_net_linear(benchmark::State& s) {
  run_net(s, *the_workload().linear);
}
void BM_exec_compiled(benchmark::State& s) {
  run_exec(s, *the_workload().compiled);
}
void BM_exec_linear(benchmark::State& s) {
  run_exec(s, *the_workload().linear);
}

BENCHMARK(BM_fs_compiled);
BENCHMARK(BM_fs_linear);
BENCHMARK(BM_net_compiled);
BENCHMARK(BM_net_linear);
BENCHMARK(BM_exec_compiled);
BENCHMARK(BM_exec_linear);

// -- summary: p50 ns per check over batches -----------------------------------

struct figure {
  double checks_per_s = 0;
  double p50_ns = 0;
};

/// Times `batch` consecutive checks at a time (a clock read costs ~20 ns, so
/// single checks cannot be timed honestly), many times over; the median batch
/// gives p50 ns per check, the total gives checks/s.
template <class Check> figure measure(size_t n_queries, Check&& check) {
  using clock = std::chrono::steady_clock;
  constexpr size_t batch = 32;
  const auto budget = std::chrono::milliseconds(400);
  castellan::bench::samples per_check;
  size_t total = 0;
  size_t q = 0;
  const auto start = clock::now();
  while (clock::now() - start < budget) {
    const auto t0 = clock::now();
    for (size_t k = 0; k < batch; ++k)
      check(q++ % n_queries);
    const auto t1 = clock::now();
    per_check.add(std::chrono::duration<double, std::nano>(t1 - t0).count() /
                  static_cast<double>(batch));
    total += batch;
  }
  const double elapsed = std::chrono::duration<double>(clock::now() - start).count();
  return figure{static_cast<double>(total) / elapsed, per_check.percentile(0.5)};
}

void summary() {
  const auto& w = the_workload();
  struct row {
    const char* domain;
    figure compiled;
    figure linear;
  };
  std::vector<row> rows;
  auto fs_c = [&](size_t i) {
    benchmark::DoNotOptimize(w.compiled->check_fs(w.fs[i].path, w.fs[i].access));
  };
  auto fs_l = [&](size_t i) {
    benchmark::DoNotOptimize(w.linear->check_fs(w.fs[i].path, w.fs[i].access));
  };
  auto net_c = [&](size_t i) {
    const auto& q = w.net[i];
    benchmark::DoNotOptimize(w.compiled->check_net(q.proto, q.address, q.port));
  };
  auto net_l = [&](size_t i) {
    const auto& q = w.net[i];
    benchmark::DoNotOptimize(w.linear->check_net(q.proto, q.address, q.port));
  };
  auto ex_c = [&](size_t i) { benchmark::DoNotOptimize(w.compiled->check_exec(w.exec[i])); };
  auto ex_l = [&](size_t i) { benchmark::DoNotOptimize(w.linear->check_exec(w.exec[i])); };
  rows.push_back({"fs", measure(w.fs.size(), fs_c), measure(w.fs.size(), fs_l)});
  rows.push_back({"net", measure(w.net.size(), net_c), measure(w.net.size(), net_l)});
  rows.push_back({"exec", measure(w.exec.size(), ex_c), measure(w.exec.size(), ex_l)});

  std::printf("\npolicy check, %zu rules per domain, %zu queries per domain "
              "(compiled snapshot vs naive linear baseline, same run)\n",
              rules_per_domain, query_count);
  std::printf("%-6s %16s %14s   %16s %14s   %8s\n", "domain", "compiled chk/s", "compiled p50",
              "linear chk/s", "linear p50", "speedup");
  bool met = true;
  for (const auto& r : rows) {
    const double ratio = r.linear.p50_ns / r.compiled.p50_ns;
    std::printf("%-6s %16.0f %11.1f ns   %16.0f %11.1f ns   %7.1fx\n", r.domain,
                r.compiled.checks_per_s, r.compiled.p50_ns, r.linear.checks_per_s, r.linear.p50_ns,
                ratio);
    met = met && ratio >= 10.0 && r.compiled.p50_ns < 300.0;
  }
  std::printf("target (>= 10x the linear baseline and < 300 ns p50 in every domain): %s\n",
              met ? "met" : "NOT met");
}

} // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv))
    return 1;
  the_workload(); // build outside the timed loops
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  summary();
  return 0;
}
