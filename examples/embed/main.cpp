/// @file main.cpp
/// Embedding castellan: a C++ service spawns the actor tree in its own
/// actor_system and sends typed `exec` requests to the supervisor.
///
/// 8 requesters send 10,000 requests in all to a pool of 4 warm workers. Each
/// request's code prints its own id, so every result can be checked against
/// the request it answers. Prints the latency percentiles seen by the
/// requesters and exits 1 if any result is wrong.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"

int main(int argc, char** argv) {
  using namespace castellan;
  const int total = argc > 1 ? std::atoi(argv[1]) : 10'000;
  constexpr int requesters = 8;

  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  supervisor_config sc;
  pool_config pool;
  pool.size = 4;
  sc.pools.push_back(pool);
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::fprintf(stderr, "embed: %s\n", sup.error().describe().c_str());
    return 2;
  }

  std::atomic<int> next{0};
  std::atomic<int> mismatches{0};
  std::vector<std::vector<double>> latencies(requesters);
  auto started = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int r = 0; r < requesters; ++r) {
    threads.emplace_back([&, r] {
      caf::scoped_actor self{sys};
      for (int i = next++; i < total; i = next++) {
        exec_request req;
        req.code = "print(" + std::to_string(i) + ")";
        auto t0 = std::chrono::steady_clock::now();
        self->request(*sup, caf::infinite, exec_atom::value, std::move(req))
          .receive(
            [&](const exec_result& res) {
              auto us = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now() - t0)
                          .count();
              latencies[static_cast<std::size_t>(r)].push_back(us);
              if (res.error != error_class::ok || res.stdout_data != std::to_string(i) + "\n") {
                if (mismatches++ < 5)
                  std::fprintf(stderr, "request %d: got %s '%s'\n", i,
                               to_string(res.error).c_str(), res.stdout_data.c_str());
              }
            },
            [&](const caf::error& err) {
              ++mismatches;
              std::fprintf(stderr, "request %d: %s\n", i, sys.render(err).c_str());
            });
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();

  std::vector<double> all;
  for (auto& l : latencies)
    all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  auto pct = [&](double p) {
    return all.empty() ? 0.0 : all[std::min(all.size() - 1, static_cast<std::size_t>(p * static_cast<double>(all.size())))];
  };
  std::printf("%zu results from %d requesters, pool of %u: %d mismatched\n", all.size(),
              requesters, pool.size, mismatches.load());
  std::printf("latency p50 %.0f us  p99 %.0f us  max %.0f us  throughput %.0f execs/s\n",
              pct(0.50), pct(0.99), all.empty() ? 0.0 : all.back(),
              static_cast<double>(all.size()) / seconds);
  caf::anon_send(*sup, shutdown_atom::value);
  return mismatches == 0 && static_cast<int>(all.size()) == total ? 0 : 1;
}
