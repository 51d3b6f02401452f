/// @file main.cpp
/// Warm-pool exec latency through the typed actor API, in both execution
/// modes, side by side with the baselines measured in the same run:
///  - cold: `python3 -c 'print(1)'` started per request;
///  - floor (reuse): a bare C++ driver and a bare warm Python `exec()` loop
///    talking over a pipe (no actors, no rings, no framing);
///  - floor (fork): the same driver and a bare warm Python with the harness's
///    modules imported that forks a child per request, which runs the code,
///    reports one byte on a pipe and is reaped.
/// And, on a fork-mode pool under policies/default.json, the same exec with
/// and without a stricter request policy (narrowed in the exec's process:
/// an extra Landlock ruleset and seccomp filter), side by side.
///
/// Usage: bench_exec_latency [iterations] [all|shared|isolated]
/// (default 5000, all; the fork-mode rows run a tenth of the iterations,
/// at least 100).

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>
#include <nlohmann/json.hpp>

#include "actors/interfaces.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
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
double run_sequential(caf::actor_system& sys, const Handle& dest, const char* what,
                      const std::string& code, int iterations, const std::string& pool = {}) {
  caf::scoped_actor self{sys};
  bench::samples s;
  int errors = 0;
  for (int i = 0; i < iterations / 10; ++i) { // warm-up
    exec_request req;
    req.code = code;
    req.pool = pool;
    self->request(dest, caf::infinite, exec_atom::value, req)
        .receive([](exec_result&) {}, [](caf::error&) {});
  }
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    exec_request req;
    req.code = code;
    req.pool = pool;
    auto t0 = clock_type::now();
    self->request(dest, caf::infinite, exec_atom::value, std::move(req))
        .receive(
            [&](exec_result& r) {
              s.add(micros_since(t0));
              errors += r.error != error_class::ok;
            },
            [&](caf::error&) { ++errors; });
  }
  const double p50 = s.percentile(0.50);
  report(what, s, std::chrono::duration<double>(clock_type::now() - start).count());
  if (errors)
    std::printf("  !! %d failed requests\n", errors);
  return p50;
}

/// An isolated pool under policies/default.json: 'pass' without and with a
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
  pc.mode = exec_mode::isolated;
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
  auto plain = report("isolated mode: 'pass', the pool's policy", with_pool, seconds);
  auto narrowed = report("isolated mode: 'pass', stricter request policy", with_request, seconds);
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
                    int iterations, const std::string& pool = {}) {
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
        req.pool = pool;
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

/// The floor of reuse mode: a warm `exec()` loop.
const char* const reuse_floor_loop =
    "import os\n"
    "while True:\n"
    "    n = int.from_bytes(os.read(0, 4), 'little')\n"
    "    if n == 0: break\n"
    "    code = b''\n"
    "    while len(code) < n: code += os.read(0, n - len(code))\n"
    "    exec(compile(code, '<exec>', 'exec'), {'__name__': '__main__'})\n"
    "    os.write(1, b'\\x00')\n";

/// The floor of fork mode: what the zygote holds when it forks (the
/// harness's runtime module, its serving imports and the preload; nothing
/// is run), then per request a child forked to run the code and report one
/// byte on a fresh pipe, reaped before the answer.
std::string fork_floor_loop(const std::string& harness_dir) {
  return "import os, sys, gc\n"
         "sys.path.insert(0, '" +
         harness_dir +
         "')\n"
         "import castellan_runtime\n"
         "import castellan_plumbing as h\n"
         "sys.path.pop(0)\n"
         "h._import_serving_modules()\n"
         "for name in h.PRELOAD: __import__(name)\n"
         "gc.collect(); gc.freeze()\n"
         "while True:\n"
         "    n = int.from_bytes(os.read(0, 4), 'little')\n"
         "    if n == 0: break\n"
         "    code = b''\n"
         "    while len(code) < n: code += os.read(0, n - len(code))\n"
         "    r, w = os.pipe()\n"
         "    pid = os.fork()\n"
         "    if pid == 0:\n"
         "        os.close(r)\n"
         "        try:\n"
         "            exec(compile(code, '<exec>', 'exec'), {'__name__': '__main__'})\n"
         "            status = 0\n"
         "        except BaseException:\n"
         "            status = 1\n"
         "        os.write(w, bytes([status]))\n"
         "        os._exit(0)\n"
         "    os.close(w)\n"
         "    report = os.read(r, 1)\n"
         "    os.close(r)\n"
         "    os.waitpid(pid, 0)\n"
         "    os.write(1, report)\n";
}

/// A bare Python loop (`script`: reads length-prefixed code on stdin,
/// answers one byte per request on stdout) driven directly over two pipes.
class python_loop {
public:
  explicit python_loop(const std::string& script) {
    int to_py[2], from_py[2];
    if (pipe(to_py) != 0 || pipe(from_py) != 0)
      return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(to_py[0], 0);
      dup2(from_py[1], 1);
      // The flags castellan-worker starts the harness with.
      execl("/usr/bin/python3", "python3", "-I", "-S", "-B", "-c", script.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    close(to_py[0]);
    close(from_py[1]);
    to_ = to_py[1];
    from_ = from_py[0];
  }
  python_loop(const python_loop&) = delete;
  python_loop& operator=(const python_loop&) = delete;
  ~python_loop() {
    if (pid_ <= 0)
      return;
    uint32_t zero = 0;
    (void)!write(to_, &zero, 4);
    close(to_);
    close(from_);
    int status;
    waitpid(pid_, &status, 0);
  }

  /// CPU time of the loop's process and the children it reaped, in µs.
  double cpu_us() const {
    char path[64];
    std::snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid_));
    FILE* f = std::fopen(path, "r");
    if (f == nullptr)
      return 0;
    char buf[1024];
    const std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');
    if (p == nullptr)
      return 0;
    // utime, stime, cutime, cstime are fields 14 to 17; ')' ends field 2.
    unsigned long long v[4] = {};
    int field = 2;
    for (const char* q = p + 1; *q != '\0' && field < 17; ++q) {
      if (*q == ' ') {
        ++field;
        if (field >= 14)
          v[field - 14] = std::strtoull(q + 1, nullptr, 10);
      }
    }
    return static_cast<double>(v[0] + v[1] + v[2] + v[3]) * 1e6 /
           static_cast<double>(sysconf(_SC_CLK_TCK));
  }

  bool roundtrip(const std::string& code) {
    uint32_t n = static_cast<uint32_t>(code.size());
    std::string msg(reinterpret_cast<const char*>(&n), 4);
    msg += code;
    if (write(to_, msg.data(), msg.size()) != static_cast<ssize_t>(msg.size()))
      return false;
    char ack;
    return read(from_, &ack, 1) == 1;
  }

private:
  pid_t pid_ = -1;
  int to_ = -1;
  int from_ = -1;
};

/// A floor row: `script` driven sequentially. Returns the p50.
double run_floor(const char* what, const std::string& script, int iterations) {
  python_loop py(script);
  for (int i = 0; i < iterations / 10; ++i)
    py.roundtrip("pass");
  bench::samples s;
  auto start = clock_type::now();
  for (int i = 0; i < iterations; ++i) {
    auto t0 = clock_type::now();
    if (!py.roundtrip("pass"))
      break;
    s.add(micros_since(t0));
  }
  const double p50 = s.percentile(0.50);
  report(what, s, std::chrono::duration<double>(clock_type::now() - start).count());
  return p50;
}

/// Isolated mode against its floor: blocks of requests to the "isolated" pool and to
/// the bare forking zygote take turns, so that both see the same machine
/// (a fork costs milliseconds, and other load comes and goes meanwhile).
/// Prints both rows and the ratio of the p50s.
void run_fork_comparison(caf::actor_system& sys, const supervisor_actor& sup,
                         const std::string& harness_dir, int iterations) {
  constexpr int block = 20;
  python_loop floor(fork_floor_loop(harness_dir));
  caf::scoped_actor self{sys};
  int errors = 0;
  // The worker's cgroup (castellan-worker, the harness, its zygote, the
  // exec's process) against the floor process and its children.
  double ours_cpu_us = 0;
  auto castellan_once = [&]() -> double {
    exec_request req;
    req.code = "pass";
    req.pool = "isolated";
    auto t0 = clock_type::now();
    double us = 0;
    self->request(sup, caf::infinite, exec_atom::value, std::move(req))
        .receive(
            [&](exec_result& r) {
              us = micros_since(t0);
              errors += r.error != error_class::ok;
              ours_cpu_us += static_cast<double>(r.usage.cpu_us);
            },
            [&](caf::error&) { ++errors; });
    return us;
  };
  for (int i = 0; i < block; ++i) { // warm-up
    castellan_once();
    floor.roundtrip("pass");
  }
  bench::samples ours;
  bench::samples base;
  double ours_s = 0;
  double base_s = 0;
  double base_cpu_us = 0;
  ours_cpu_us = 0;
  for (int done = 0; done < iterations; done += block) {
    for (int i = 0; i < block; ++i) {
      const double us = castellan_once();
      ours.add(us);
      ours_s += us / 1e6;
    }
    const double cpu0 = floor.cpu_us();
    for (int i = 0; i < block; ++i) {
      auto t0 = clock_type::now();
      if (!floor.roundtrip("pass"))
        break;
      const double us = micros_since(t0);
      base.add(us);
      base_s += us / 1e6;
    }
    base_cpu_us += floor.cpu_us() - cpu0;
  }
  const double ours_p50 = ours.percentile(0.5);
  const double base_p50 = base.percentile(0.5);
  report("castellan isolated: 'pass' via supervisor", ours, ours_s);
  report("floor: bare warm zygote forking per request", base, base_s);
  if (errors)
    std::printf("  !! %d failed requests\n", errors);
  if (base_p50 > 0)
    std::printf("isolated mode p50 / its floor's p50: %.2f (target <= 1.2)\n", ours_p50 / base_p50);
  const double n = static_cast<double>(base.size());
  if (base_cpu_us > 0 && n > 0)
    std::printf("CPU per exec: castellan's worker %.0f us, the floor %.0f us (%.2f)\n",
                ours_cpu_us / static_cast<double>(ours.size()), base_cpu_us / n,
                (ours_cpu_us / static_cast<double>(ours.size())) / (base_cpu_us / n));
}

} // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 5000;
  const std::string rows = argc > 2 ? argv[2] : "all";
  if (iterations <= 0 || (rows != "all" && rows != "shared" && rows != "isolated")) {
    std::fprintf(stderr, "usage: bench_exec_latency [iterations] [all|shared|isolated]\n");
    return 2;
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  auto layout = platform::find_install_layout();
  if (!layout) {
    std::fprintf(stderr, "bench: %s\n", layout.error().describe().c_str());
    return 2;
  }
  const std::string harness_dir = layout->harness.substr(0, layout->harness.rfind('/'));

  // Two pools of 4: the first ("default") shares the warm interpreter
  // between execs, "isolated" forks a child of the warm zygote per exec.
  supervisor_config sc;
  pool_config pc;
  pc.size = 4;
  pc.mode = exec_mode::shared;
  sc.pools.push_back(pc);
  pc.name = "isolated";
  pc.mode = exec_mode::isolated;
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
  const bool shared_rows = rows == "all" || rows == "shared";
  const bool isolated_rows = rows == "all" || rows == "isolated";
  std::printf("%u cores\n", std::thread::hardware_concurrency());
  if (shared_rows) {
    std::printf("\nshared mode, %d requests per row\n", iterations);
    std::printf("%-52s %8s %8s %10s\n", "", "p50 us", "p99 us", "execs/s");
    run_sequential(sys, *sup, "castellan: 'pass' via supervisor", "pass", iterations);
    run_sequential(sys, *sup, "castellan: 'print(1)' via supervisor", "print(1)", iterations);
    run_sequential(sys, pool, "castellan: 'pass' direct to pool", "pass", iterations);
    run_concurrent(sys, *sup, "castellan: 'pass', 8 clients, pool of 4", 8, iterations * 2);
    run_floor("floor: bare warm exec() loop over a pipe", reuse_floor_loop, iterations);
  }
  if (isolated_rows) {
    // A fork costs a process: a tenth of the requests.
    const int n = std::max(100, iterations / 10);
    std::printf("\nisolated mode, %d requests per row\n", n);
    std::printf("%-52s %8s %8s %10s\n", "", "p50 us", "p99 us", "execs/s");
    run_fork_comparison(sys, *sup, harness_dir, n);
    run_sequential(sys, *sup, "castellan isolated: 'print(1)' via supervisor", "print(1)", n, "isolated");
    run_concurrent(sys, *sup, "castellan isolated: 'pass', 8 clients, pool of 4", 8, n * 2, "isolated");
    std::printf("\nisolated mode, a pool of 1 under policies/default.json, %d requests per row\n", n);
    std::printf("%-52s %8s %8s %10s\n", "", "p50 us", "p99 us", "execs/s");
    run_fork_rows(sys, n);
  }
  std::printf("\n");
  run_cold(std::max(20, iterations / 100));
  caf::anon_send(*sup, shutdown_atom::value);
  return 0;
}
