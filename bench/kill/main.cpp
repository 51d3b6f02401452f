/// @file main.cpp
/// The hard kill, measured through the supervisor's typed API, each figure
/// beside its baseline from the same run:
///  - deadline to result: an exec with a short timeout whose code never
///    ends by itself (a busy loop; a blocked read; code that ignores SIGTERM
///    and forks spinning children), from the deadline instant to the
///    requester holding the `timeout` result. Baseline: the same code as a
///    bare python3 process that a timer thread kills with SIGKILL at the
///    same deadline and reaps (from the deadline to the reaped child).
///  - refill after a mass kill: a pool of 32 whose 32 execs are all
///    cancelled at once (each worker killed as a whole), from the first
///    cancel to all 32 replacements ready. Baseline: the same pool started
///    from cold, from its spawn to 32 workers ready.
///
/// Usage: bench_kill [samples] [rounds]   (default 50 per code, 3 rounds)

#include <dirent.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "support/percentiles.hpp"

extern char** environ;

namespace {

using namespace castellan;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

constexpr auto deadline = 100ms;
constexpr uint32_t refill_size = 32;

double micros(clock_type::duration d) {
  return std::chrono::duration<double, std::micro>(d).count();
}

struct kill_case {
  const char* name;
  const char* code;
};

const kill_case cases[] = {
    {"while True: pass", "while True: pass\n"},
    {"a blocked read", "import os\nr, w = os.pipe()\nos.read(r, 1)\n"},
    {"SIGTERM ignored, 4 forked spinners", "import os, signal\n"
                                           "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                           "for _ in range(4):\n"
                                           "    if os.fork() == 0:\n"
                                           "        break\n"
                                           "while True: pass\n"},
};

pool_status status_of(caf::scoped_actor& self, const pool_actor& pool) {
  pool_status st;
  self->request(pool, 10s, status_atom::value)
      .receive([&](pool_status& s) { st = s; }, [](caf::error&) {});
  return st;
}

/// Waits until every worker of `pool` is ready (after the last kill the
/// pool is starting replacements): each sample starts on a warm pool.
void wait_all_idle(caf::scoped_actor& self, const pool_actor& pool, uint32_t size) {
  for (int i = 0; i < 6000; ++i) {
    auto st = status_of(self, pool);
    if (st.idle >= size)
      return;
    std::this_thread::sleep_for(5ms);
  }
}

/// Castellan: from the deadline (the request's send + its timeout: an upper
/// bound, the request's way to the pool included) to the timeout result.
struct deadline_samples {
  bench::samples total;   ///< deadline to the requester holding the result
  bench::samples in_pool; ///< deadline to the pool answering (the result's own timing)
};

deadline_samples castellan_deadline(caf::actor_system& sys, const supervisor_actor& sup,
                                    const pool_actor& pool, const kill_case& c, int samples,
                                    int& wrong) {
  caf::scoped_actor self{sys};
  deadline_samples s;
  for (int i = 0; i < samples; ++i) {
    wait_all_idle(self, pool, 4);
    exec_request req;
    req.code = c.code;
    req.timeout_ms = static_cast<uint64_t>(deadline.count());
    const auto sent = clock_type::now();
    self->request(sup, caf::infinite, exec_atom::value, std::move(req))
        .receive(
            [&](exec_result& r) {
              s.total.add(micros(clock_type::now() - (sent + deadline)));
              // Arrival at the pool to its answer, less the timeout.
              s.in_pool.add(static_cast<double>(r.timing.queue_us + r.timing.run_us) -
                            micros(deadline));
              wrong += r.error != error_class::timeout || r.exit_code != 124;
            },
            [&](caf::error&) { ++wrong; });
  }
  return s;
}

/// Baseline: a bare python3 running the same code, SIGKILLed by this thread
/// at the deadline and reaped (its process group, like the code's forks).
bench::samples bare_deadline(const kill_case& c, int samples) {
  bench::samples s;
  for (int i = 0; i < samples; ++i) {
    const char* argv[] = {"/usr/bin/python3", "-I", "-S", "-c", c.code, nullptr};
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
    posix_spawnattr_setpgroup(&attr, 0);
    pid_t pid;
    const auto started = clock_type::now();
    if (posix_spawn(&pid, argv[0], nullptr, &attr, const_cast<char**>(argv), environ) != 0) {
      std::printf("  !! cannot start python3\n");
      return s;
    }
    posix_spawnattr_destroy(&attr);
    std::this_thread::sleep_until(started + deadline);
    const auto due = clock_type::now();
    ::kill(-pid, SIGKILL);
    int status;
    ::waitpid(pid, &status, 0);
    s.add(micros(clock_type::now() - due));
  }
  return s;
}

void report_us(const char* what, bench::samples& s) {
  std::printf("  %-46s %9.0f %9.0f %9.0f\n", what, s.percentile(0.5), s.percentile(0.99),
              s.percentile(1.0));
}

/// Processes whose parent is this one (the supervisor's workers).
int children() {
  int n = 0;
  const std::string me = " " + std::to_string(::getpid()) + " ";
  if (DIR* d = ::opendir("/proc")) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] < '0' || e->d_name[0] > '9')
        continue;
      std::ifstream in(std::string("/proc/") + e->d_name + "/stat");
      std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      const auto close = stat.rfind(')');
      // ") S <ppid> ". A process that exits while it is read can leave a
      // short or empty line: compare() past its end would throw.
      if (close != std::string::npos && close + 3 + me.size() <= stat.size() &&
          stat.compare(close + 3, me.size(), me) == 0)
        ++n;
    }
    ::closedir(d);
  }
  return n;
}

/// Stops the supervisor and waits until its workers are gone, so that the
/// next measurement does not share the machine with their teardown.
void stop(caf::scoped_actor& self, const supervisor_actor& sup) {
  self->send(sup, shutdown_atom::value);
  for (int i = 0; i < 3000 && children() > 0; ++i)
    std::this_thread::sleep_for(10ms);
}

/// A supervisor with one pool of `size`, whose worker state events come to
/// `self`.
outcome<supervisor_actor> start_pool(caf::actor_system& sys, caf::scoped_actor& self,
                                     uint32_t size, bool warm_start = false) {
  supervisor_config sc;
  pool_config pc;
  pc.size = size;
  pc.warm_start = warm_start;
  sc.pools.push_back(pc);
  auto sup = spawn_supervisor(sys, sc);
  if (sup)
    self->send(*sup, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  return sup;
}

/// Counts `ready` events until `n` arrived (at most 120 s); the time of the
/// last one, nullopt on timeout.
std::optional<clock_type::time_point> wait_ready(caf::scoped_actor& self, uint32_t n) {
  uint32_t ready = 0;
  bool timed_out = false;
  auto last = clock_type::now();
  while (ready < n && !timed_out) {
    self->receive(
        [&](worker_state_event& ev) {
          if (ev.state == worker_state::ready) {
            ++ready;
            last = clock_type::now();
          }
        },
        [](exec_result&) {}, [](cancel_reply&) {}, [](caf::error&) {},
        caf::after(120s) >> [&] { timed_out = true; });
  }
  if (timed_out)
    return std::nullopt;
  return last;
}

/// Drops the events (and anything else) waiting for `self`.
void drain(caf::scoped_actor& self) {
  bool more = true;
  while (more)
    self->receive([](worker_state_event&) {}, [](exec_result&) {}, [](cancel_reply&) {},
                  caf::after(std::chrono::milliseconds(0)) >> [&] { more = false; });
}

struct refill_times {
  double cold_ms = -1;
  double refill_ms = -1;
};

/// One round: a pool of 32 from cold, then all its workers killed at once.
/// `warm_start`: its workers are cloned by its launcher (which starts with
/// the pool, inside the first figure).
refill_times refill_round(caf::actor_system& sys, bool warm_start) {
  refill_times t;
  caf::scoped_actor self{sys};
  const auto spawned = clock_type::now();
  auto sup = start_pool(sys, self, refill_size, warm_start);
  if (!sup) {
    std::printf("  !! %s\n", sup.error().describe().c_str());
    return t;
  }
  if (auto all = wait_ready(self, refill_size))
    t.cold_ms = micros(*all - spawned) / 1000;
  // 32 execs that never end, one per worker, all running; then 32 cancels
  // in a row: the pool kills each worker as it reads its cancel.
  const uint64_t first_id = 1'000'000;
  for (uint32_t i = 0; i < refill_size; ++i) {
    exec_request req;
    req.exec_id = first_id + i;
    req.code = "import time\ntime.sleep(600)\n";
    self->send(*sup, exec_atom::value, std::move(req));
  }
  pool_actor pool;
  self->request(*sup, 10s, get_pool_atom::value, std::string{})
      .receive([&](pool_actor& p) { pool = p; }, [](caf::error&) {});
  for (int i = 0; i < 6000 && status_of(self, pool).busy < refill_size; ++i)
    std::this_thread::sleep_for(5ms);
  drain(self);
  const auto killed = clock_type::now();
  for (uint32_t i = 0; i < refill_size; ++i)
    self->send(*sup, cancel_atom::value, first_id + i);
  if (auto all = wait_ready(self, refill_size))
    t.refill_ms = micros(*all - killed) / 1000;
  stop(self, *sup);
  return t;
}

} // namespace

int main(int argc, char** argv) {
  const int samples = argc > 1 ? std::atoi(argv[1]) : 50;
  const int rounds = argc > 2 ? std::atoi(argv[2]) : 3;
  if (samples <= 0 || rounds <= 0) {
    std::fprintf(stderr, "usage: bench_kill [samples] [rounds]\n");
    return 2;
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};
  std::printf("%u cores\n", std::thread::hardware_concurrency());

  {
    caf::scoped_actor self{sys};
    supervisor_config sc;
    pool_config pc;
    pc.size = 4;
    sc.pools.push_back(pc);
    auto sup = spawn_supervisor(sys, sc);
    if (!sup) {
      std::fprintf(stderr, "bench_kill: %s\n", sup.error().describe().c_str());
      return 2;
    }
    pool_actor pool;
    self->request(*sup, 10s, get_pool_atom::value, std::string{})
        .receive([&](pool_actor& p) { pool = p; }, [](caf::error&) {});
    std::printf("\ndeadline to result, %d execs per row, %lld ms deadline, pool of 4 "
                "(target: p99 <= 10 ms)\n",
                samples, static_cast<long long>(deadline.count()));
    std::printf("  %-46s %9s %9s %9s\n", "", "p50 us", "p99 us", "max us");
    int wrong = 0;
    for (const auto& c : cases) {
      auto ours = castellan_deadline(sys, *sup, pool, c, samples, wrong);
      auto bare = bare_deadline(c, samples);
      std::printf("%s\n", c.name);
      report_us("castellan: timer, kill, answer", ours.total);
      report_us("  of which in the pool (the result's timing)", ours.in_pool);
      report_us("baseline: bare python3, SIGKILL and reap", bare);
    }
    if (wrong != 0)
      std::printf("  !! %d results were not timeout/124\n", wrong);
    stop(self, *sup);
  }

  std::printf("\n%u workers: all ready, per round (ms)\n", refill_size);
  std::printf("%-52s", "");
  for (int r = 0; r < rounds; ++r)
    std::printf(" %9s", ("round " + std::to_string(r + 1)).c_str());
  std::printf("\n");
  std::vector<refill_times> times, warm;
  for (int r = 0; r < rounds; ++r) {
    times.push_back(refill_round(sys, false));
    warm.push_back(refill_round(sys, true));
  }
  auto row = [](const char* what, const std::vector<refill_times>& ts, bool refill) {
    std::printf("%-52s", what);
    for (const auto& t : ts)
      std::printf(" %9.0f", refill ? t.refill_ms : t.cold_ms);
    std::printf("\n");
  };
  row("baseline: a pool of 32 from cold to all ready", times, false);
  row("castellan: refill after all 32 killed at once", times, true);
  row("warm start: a pool of 32 from cold to all ready", warm, false);
  row("warm start: refill after all 32 killed at once", warm, true);
  return 0;
}
