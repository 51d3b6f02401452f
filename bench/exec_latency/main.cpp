/// @file main.cpp
/// Warm-pool exec latency through the typed actor API, side by side with two
/// baselines measured in the same run:
///  - cold: `python3 -c 'print(1)'` started per request;
///  - floor: a bare C++ driver and a bare warm Python `exec()` loop talking
///    over a pipe (no actors, no rings, no framing).
/// And, on a fork-mode pool under policies/default.json, the same exec with
/// and without a stricter request policy (narrowed in the exec's process:
/// an extra Landlock ruleset and seccomp filter), side by side.
///
/// Usage: bench_exec_latency [iterations]   (default 5000)

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/interfaces.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/install_layout.hpp"
#include "support/percentiles.hpp"

extern char** environ;

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;

double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

/// Where narrowing an exec spends its time, from each result's report.
struct narrowing_samples {
  bench::samples prepare; ///< the zygote builds the ruleset and the filter
  bench::samples apply;   ///< the exec's process enforces them
};

/// p50 and p99 of a row, for the ratios.
struct figures {
  double p50 = 0;
  double p99 = 0;
};

figures report(const char* what, bench::samples& s, double seconds) {
  const double p50 = s.percentile(0.50);
  const double p99 = s.percentile(0.99);
  std::printf("%-52s %8.1f %8.1f %10.0f\n", what, p50, p99,
              seconds > 0 ? static_cast<double>(s.size()) / seconds : 0.0);
  return {p50, p99};
}

/// Sequential requests from one requester to `dest`.
template <class Handle>
void run_sequential(caf::actor_system& sys, const Handle& dest, const char* what,
                    const std::string& code, int iterations) {
  caf::scoped_actor self{sys};
  bench::samples s;
  int errors = 0;
  for (int i = 0; i < iterations / 10; ++i) { // warm-up
    exec_request req;
    req.code = code;
    self->request(dest, caf::infinite, exec_atom::value, req).receive([](exec_result&) {},
                                                                      [](caf::error&) {});
  }
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    exec_request req;
    req.code = code;
    auto t0 = clock_type::now();
    self->request(dest, caf::infinite, exec_atom::value, std::move(req))
      .receive(
        [&](exec_result& r) {
          s.add(micros_since(t0));
          errors += r.error != error_class::ok;
        },
        [&](caf::error&) { ++errors; });
  }
  report(what, s, std::chrono::duration<double>(clock_type::now() - start).count());
  if (errors)
    std::printf("  !! %d failed requests\n", errors);
}

/// A fork-mode pool under policies/default.json: 'pass' without and with a
/// stricter request policy (the default plus one denied call), so that the
/// exec's process applies a Landlock ruleset and a seccomp filter.
void run_fork_rows(caf::actor_system& sys, int iterations) {
  auto layout = platform::find_install_layout();
  if (!layout) {
    std::printf("  !! no install layout: %s\n", layout.error().describe().c_str());
    return;
  }
  auto doc = policy::load_policy(layout->policies_dir + "/default.json", layout->policies_dir);
  if (!doc) {
    std::printf("  !! %s\n", doc.to_failure().describe().c_str());
    return;
  }
  supervisor_config sc;
  pool_config pc;
  pc.size = 1;
  pc.mode = exec_mode::fork;
  if (auto ok = apply_policy(*doc, pc); !ok) {
    std::printf("  !! %s\n", ok.error().describe().c_str());
    return;
  }
  sc.pools.push_back(pc);
  sc.policy_pools.policy_dir = layout->policies_dir;
  sc.policy_pools.max_pools = 0; // a request that is not narrowed would be a failure here
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::printf("  !! %s\n", sup.error().describe().c_str());
    return;
  }
  const std::string stricter =
      R"({"version": 1, "extends": ["default"], "antiEscape": {"denySyscalls": ["uname"]}})";
  {
    // Check once that the request is narrowed, not refused or rerouted.
    caf::scoped_actor self{sys};
    exec_request req;
    req.code = "import os\ntry:\n    os.uname()\nexcept PermissionError:\n    print('narrowed')";
    req.policy = stricter;
    self->request(*sup, caf::infinite, exec_atom::value, req)
        .receive(
            [&](exec_result& r) {
              if (r.stdout_data != "narrowed\n" ||
                  r.enforcement.find("\"tightening\"") == std::string::npos)
                std::printf("  !! the request policy was not narrowed: %s %s\n",
                            to_string(r.error).c_str(), r.detail.c_str());
            },
            [&](caf::error& err) { std::printf("  !! %s\n", sys.render(err).c_str()); });
  }
  // Interleaved, one request of each kind in turn, so that both rows see
  // the same machine (the fork path's own cost moves with the load).
  caf::scoped_actor self{sys};
  bench::samples with_pool;
  bench::samples with_request;
  narrowing_samples narrowing;
  int errors = 0;
  auto once = [&](const std::string& policy, bench::samples& into, bool record) {
    exec_request req;
    req.code = "pass";
    req.policy = policy;
    auto t0 = clock_type::now();
    self->request(*sup, caf::infinite, exec_atom::value, std::move(req))
        .receive(
            [&](exec_result& r) {
              if (!record)
                return;
              into.add(micros_since(t0));
              errors += r.error != error_class::ok;
              if (policy.empty())
                return;
              auto j = nlohmann::json::parse(r.enforcement, nullptr, false);
              if (!j.is_object() || !j.contains("tightening")) {
                ++errors;
                return;
              }
              narrowing.prepare.add(j["tightening"].value("prepare_us", 0.0));
              narrowing.apply.add(j["tightening"].value("apply_us", 0.0));
            },
            [&](caf::error&) { ++errors; });
  };
  for (int i = 0; i < iterations / 10; ++i) { // warm-up
    once({}, with_pool, false);
    once(stricter, with_request, false);
  }
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    once({}, with_pool, true);
    once(stricter, with_request, true);
  }
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count() / 2;
  auto plain = report("fork mode: 'pass', the pool's policy", with_pool, seconds);
  auto narrowed = report("fork mode: 'pass', stricter request policy", with_request, seconds);
  if (errors)
    std::printf("  !! %d failed requests\n", errors);
  if (plain.p50 > 0 && plain.p99 > 0)
    std::printf("%-52s %7.2fx %7.2fx\n", "  narrowed / the pool's policy", narrowed.p50 / plain.p50,
                narrowed.p99 / plain.p99);
  if (narrowing.apply.size() > 0) {
    std::printf("%-52s %8.1f %8.1f\n", "  of which the zygote builds ruleset and filter",
                narrowing.prepare.percentile(0.50), narrowing.prepare.percentile(0.99));
    std::printf("%-52s %8.1f %8.1f\n", "  of which the exec's process enforces them",
                narrowing.apply.percentile(0.50), narrowing.apply.percentile(0.99));
  }
  caf::anon_send(*sup, shutdown_atom::value);
}

/// `clients` concurrent requesters, `iterations` requests in all.
template <class Handle>
void run_concurrent(caf::actor_system& sys, const Handle& dest, const char* what, int clients,
                    int iterations) {
  std::vector<bench::samples> per(static_cast<std::size_t>(clients));
  std::atomic<int> next{0};
  std::atomic<int> errors{0};
  auto start = clock_type::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&, c] {
      caf::scoped_actor self{sys};
      while (next++ < iterations) {
        exec_request req;
        req.code = "pass";
        auto t0 = clock_type::now();
        self->request(dest, caf::infinite, exec_atom::value, std::move(req))
          .receive([&](exec_result&) { per[static_cast<std::size_t>(c)].add(micros_since(t0)); },
                   [&](caf::error&) { ++errors; });
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  bench::samples all;
  for (auto& p : per)
    all.merge(p);
  report(what, all, seconds);
  if (errors)
    std::printf("  !! %d failed requests\n", errors.load());
}

/// Baseline: a fresh interpreter per request.
void run_cold(int iterations) {
  bench::samples s;
  const char* argv[] = {"/usr/bin/python3", "-c", "print(1)", nullptr};
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    auto t0 = clock_type::now();
    pid_t pid;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&pid, argv[0], &fa, nullptr, const_cast<char**>(argv), environ) != 0) {
      std::printf("  !! cannot start python3\n");
      return;
    }
    posix_spawn_file_actions_destroy(&fa);
    int status;
    waitpid(pid, &status, 0);
    s.add(micros_since(t0));
  }
  report("baseline: python3 -c 'print(1)' per request", s,
         std::chrono::duration<double>(clock_type::now() - start).count());
}

/// The floor: a warm `exec()` loop over a pipe, driven directly.
void run_floor(int iterations) {
  static const char* loop =
    "import os\n"
    "while True:\n"
    "    n = int.from_bytes(os.read(0, 4), 'little')\n"
    "    if n == 0: break\n"
    "    code = b''\n"
    "    while len(code) < n: code += os.read(0, n - len(code))\n"
    "    exec(compile(code, '<exec>', 'exec'), {'__name__': '__main__'})\n"
    "    os.write(1, b'\\x00')\n";
  int to_py[2], from_py[2];
  if (pipe(to_py) != 0 || pipe(from_py) != 0)
    return;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(to_py[0], 0);
    dup2(from_py[1], 1);
    execl("/usr/bin/python3", "python3", "-I", "-c", loop, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(to_py[0]);
  close(from_py[1]);
  auto roundtrip = [&](const std::string& code) {
    uint32_t n = static_cast<uint32_t>(code.size());
    std::string msg(reinterpret_cast<const char*>(&n), 4);
    msg += code;
    if (write(to_py[1], msg.data(), msg.size()) != static_cast<ssize_t>(msg.size()))
      return false;
    char ack;
    return read(from_py[0], &ack, 1) == 1;
  };
  for (int i = 0; i < iterations / 10; ++i)
    roundtrip("pass");
  bench::samples s;
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    auto t0 = clock_type::now();
    if (!roundtrip("pass"))
      break;
    s.add(micros_since(t0));
  }
  report("floor: bare warm exec() loop over a pipe", s,
         std::chrono::duration<double>(clock_type::now() - start).count());
  uint32_t zero = 0;
  (void)!write(to_py[1], &zero, 4);
  close(to_py[1]);
  close(from_py[0]);
  int status;
  waitpid(pid, &status, 0);
}

} // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 5000;
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  supervisor_config sc;
  pool_config pc;
  pc.size = 4;
  sc.pools.push_back(pc);
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::fprintf(stderr, "bench: %s\n", sup.error().describe().c_str());
    return 2;
  }
  pool_actor pool;
  {
    caf::scoped_actor self{sys};
    self->request(*sup, caf::infinite, get_pool_atom::value, std::string{})
      .receive([&](pool_actor& p) { pool = p; }, [](caf::error&) {});
  }
  std::printf("exec latency, %d requests per row, %u cores\n", iterations,
              std::thread::hardware_concurrency());
  std::printf("%-52s %8s %8s %10s\n", "", "p50 us", "p99 us", "execs/s");
  run_sequential(sys, *sup, "castellan: 'pass' via supervisor", "pass", iterations);
  run_sequential(sys, *sup, "castellan: 'print(1)' via supervisor", "print(1)", iterations);
  run_sequential(sys, pool, "castellan: 'pass' direct to pool", "pass", iterations);
  run_concurrent(sys, *sup, "castellan: 'pass', 8 clients, pool of 4", 8, iterations * 2);
  run_floor(iterations);
  run_cold(std::max(20, iterations / 100));
  caf::anon_send(*sup, shutdown_atom::value);
  run_fork_rows(sys, std::max(100, iterations / 5));
  return 0;
}
