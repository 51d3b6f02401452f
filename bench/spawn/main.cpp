/// @file main.cpp
/// Cold worker creation, from nothing to READY (harness loaded, waiting for
/// code), side by side with baselines measured in the same run:
///  - castellan, full isolation: namespaces, root, Landlock, seccomp, cgroup;
///  - castellan, isolation none: the same worker as a plain process;
///  - `python3 -c pass`: the interpreter alone, and with the harness's
///    flags (-I -S: no site, no user environment);
///  - `bwrap` running `python3 -I -S -c pass` with comparable isolation, when
///    /usr/bin/bwrap exists (the bench installs nothing).
///
/// Usage: bench_spawn [iterations]   (default 50)

#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_worker.hpp"
#include "support/percentiles.hpp"

extern char** environ;

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;

double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

/// Starts a worker and waits for its READY; false on any failure. The clock
/// stops at READY: tearing the worker down (the channel's destructor kills it
/// and removes its cgroup) is not part of its creation.
bool worker_to_ready(const pool_config& cfg, const worker_template& tpl, uint64_t id,
                     bench::samples& s, std::string& error, double* took = nullptr) {
  const auto t0 = clock_type::now();
  auto ch = pool_worker::start(id, cfg, tpl);
  if (!ch) {
    error = ch.error().describe();
    return false;
  }
  for (;;) {
    pollfd fds[2] = {{(*ch)->doorbell_fd(), POLLIN, 0}, {(*ch)->pidfd(), POLLIN, 0}};
    if (::poll(fds, 2, 10'000) <= 0) {
      error = "no READY within 10 s";
      return false;
    }
    uint64_t v;
    (void)!::read((*ch)->doorbell_fd(), &v, sizeof v);
    for (auto rd = (*ch)->receive(); rd.status != ipc::ring_status::empty;
         rd = (*ch)->receive()) {
      if (rd.status == ipc::ring_status::ok && rd.value.type == ipc::message_type::ready) {
        const double us = micros_since(t0);
        s.add(us);
        if (took != nullptr)
          *took = us;
        return true;
      }
    }
    if (fds[1].revents != 0) {
      error = "worker exited before READY: " + (*ch)->reap();
      return false;
    }
  }
}

/// posix_spawn + wait; false when the program failed.
bool run_program(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  if (::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ) != 0)
    return false;
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
  }
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

struct row {
  explicit row(const char* w) : what(w) {}
  const char* what;
  bench::samples s;
  bool ok = true;
};

void print(row& r, double base_p50) {
  if (!r.ok) {
    std::printf("%-46s failed\n", r.what);
    return;
  }
  const double p50 = r.s.percentile(0.5) / 1000.0;
  const double p99 = r.s.percentile(0.99) / 1000.0;
  std::printf("%-46s %9.2f %9.2f %+10.2f\n", r.what, p50, p99, p50 - base_p50);
}

} // namespace

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::max(1, std::atoi(argv[1])) : 50;
  auto resolved = resolve_pool_config(pool_config{});
  if (!resolved) {
    std::fprintf(stderr, "bench_spawn: %s\n", resolved.error().describe().c_str());
    return 1;
  }
  pool_config sandboxed = *resolved;
  pool_config plain = *resolved;
  plain.isolation = platform::isolation_mode::none;
  pool_config warm = *resolved;
  warm.warm_start = true;
  if (auto w = resolve_pool_config(warm); w) {
    warm = *w;
  } else {
    std::fprintf(stderr, "bench_spawn: %s\n", w.error().describe().c_str());
    return 1;
  }

  // Prepared once per pool, as the pool does.
  auto sandboxed_tpl = prepare_worker_template(sandboxed);
  auto plain_tpl = prepare_worker_template(plain);
  // The launcher starts here, once, as it does when its pool starts.
  auto warm_tpl = prepare_worker_template(warm);
  for (const auto* t : {&sandboxed_tpl, &plain_tpl, &warm_tpl}) {
    if (!*t) {
      std::fprintf(stderr, "bench_spawn: %s\n", t->error().describe().c_str());
      return 1;
    }
  }
  row warm_full{"castellan warm start, full isolation -> READY"};
  row full{"castellan worker, full isolation -> READY"};
  row none{"castellan worker, isolation none -> READY"};
  row py{"python3 -c pass"};
  row py_isolated{"python3 -I -S -c pass (the harness's flags)"};
  row bw{"bwrap (ns + ro binds + proc/dev/tmp) python3"};
  const bool have_bwrap = ::access("/usr/bin/bwrap", X_OK) == 0;
  const std::vector<std::string> bwrap_argv = {
    "/usr/bin/bwrap", "--unshare-all", "--die-with-parent", "--new-session",
    "--ro-bind", "/usr", "/usr", "--symlink", "usr/lib", "/lib", "--symlink", "usr/lib64",
    "/lib64", "--symlink", "usr/bin", "/bin", "--ro-bind", "/etc/ld.so.cache",
    "/etc/ld.so.cache", "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
    "--uid", "1000", "--gid", "1000", "--hostname", "castellan",
    "/usr/bin/python3", "-I", "-S", "-c", "pass"};

  std::string error;
  uint64_t id = 1;
  // Warm start minus python3 -c pass, measured back to back in each
  // iteration: robust against the machine's slower and faster phases.
  bench::samples paired;
  for (int i = 0; i < iterations; ++i) {
    double warm_us = 0;
    if (warm_full.ok && !worker_to_ready(warm, *warm_tpl, id++, warm_full.s, error, &warm_us)) {
      std::fprintf(stderr, "bench_spawn: warm-started worker: %s\n", error.c_str());
      warm_full.ok = false;
    }
    if (full.ok && !worker_to_ready(sandboxed, *sandboxed_tpl, id++, full.s, error)) {
      std::fprintf(stderr, "bench_spawn: sandboxed worker: %s\n", error.c_str());
      full.ok = false;
    }
    if (none.ok && !worker_to_ready(plain, *plain_tpl, id++, none.s, error)) {
      std::fprintf(stderr, "bench_spawn: plain worker: %s\n", error.c_str());
      none.ok = false;
    }
    auto t0 = clock_type::now();
    py.ok = run_program({sandboxed.python, "-c", "pass"}) && py.ok;
    const double py_us = micros_since(t0);
    py.s.add(py_us);
    if (warm_full.ok)
      paired.add(warm_us - py_us);
    t0 = clock_type::now();
    py_isolated.ok = run_program({sandboxed.python, "-I", "-S", "-c", "pass"}) && py_isolated.ok;
    py_isolated.s.add(micros_since(t0));
    if (have_bwrap) {
      t0 = clock_type::now();
      bw.ok = run_program(bwrap_argv) && bw.ok;
      bw.s.add(micros_since(t0));
    }
  }
  const double base = py.s.percentile(0.5) / 1000.0;
  std::printf("cold start to ready, %d iterations (ms)\n", iterations);
  std::printf("%-46s %9s %9s %10s\n", "", "p50", "p99", "vs python");
  print(warm_full, base);
  print(full, base);
  print(none, base);
  print(py, base);
  print(py_isolated, base);
  if (have_bwrap)
    print(bw, base);
  else
    std::printf("bwrap: not installed\n");
  if (full.ok && none.ok)
    std::printf("sandbox overhead over the plain worker: %.2f ms (p50)\n",
                full.s.percentile(0.5) / 1000.0 - none.s.percentile(0.5) / 1000.0);
  if (warm_full.ok)
    std::printf("warm start over python3 -c pass: %+.2f ms (difference of the p50s), %+.2f ms "
                "(p50 of the per-iteration differences); target <= +3 ms\n",
                warm_full.s.percentile(0.5) / 1000.0 - base, paired.percentile(0.5) / 1000.0);
  return warm_full.ok && full.ok && none.ok && py.ok && py_isolated.ok ? 0 : 1;
}
