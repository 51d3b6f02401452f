/// @file main.cpp
/// Sessions, side by side with their baselines measured in the same run:
///  - create: from `session_create_atom` to the answer of the session's
///    first exec (`pass`), against a fresh exec'd sandbox doing the same
///    (spawn_pool of one shared-mode worker, its first exec answered), one
///    of each in turn;
///  - exec: `pass` in a session (through the supervisor, by id, and
///    straight to the session's handle), against `pass` on the supervisor's
///    stateless shared-mode pool, interleaved one for one.
///
/// Usage: bench_session [creates] [execs]   (defaults 30 and 2000)

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "support/percentiles.hpp"

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;

double micros_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::micro>(clock_type::now() - t0).count();
}

void print(const char* what, bench::samples& s, double unit, const char* unit_name) {
  std::printf("%-52s %9.3f %9.3f %s\n", what, s.percentile(0.5) / unit,
              s.percentile(0.99) / unit, unit_name);
}

/// Sends `req` to `dest` and waits; false on an error or a failed exec.
template <class Handle, class... Ts>
bool exec_ok(caf::scoped_actor& self, const Handle& dest, Ts&&... xs) {
  bool ok = false;
  self->request(dest, std::chrono::seconds(60), std::forward<Ts>(xs)...)
    .receive([&](exec_result& r) { ok = r.error == error_class::ok && r.exit_code == 0; },
             [&](caf::error&) { ok = false; });
  return ok;
}

} // namespace

int main(int argc, char** argv) {
  const int creates = argc > 1 ? std::atoi(argv[1]) : 30;
  const int execs = argc > 2 ? std::atoi(argv[2]) : 2000;
  if (creates <= 0 || execs <= 0) {
    std::fprintf(stderr, "usage: bench_session [creates] [execs]\n");
    return 2;
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  supervisor_config sc;
  pool_config pc;
  pc.size = 2;
  pc.mode = exec_mode::shared;
  sc.pools.push_back(pc);
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::fprintf(stderr, "bench_session: %s\n", sup.error().describe().c_str());
    return 1;
  }
  auto fresh_cfg = resolve_pool_config(pc);
  if (!fresh_cfg) {
    std::fprintf(stderr, "bench_session: %s\n", fresh_cfg.error().describe().c_str());
    return 1;
  }
  fresh_cfg->size = 1;
  caf::scoped_actor self{sys};
  exec_request pass;
  pass.code = "pass";
  bool ok = exec_ok(self, *sup, exec_atom::value, pass); // the pool is warm from here

  // -- create to first exec done ----------------------------------------------------------
  bench::samples session_create;
  bench::samples fresh_sandbox;
  for (int i = 0; ok && i < creates; ++i) {
    auto t0 = clock_type::now();
    std::string id;
    self->request(*sup, std::chrono::seconds(60), session_create_atom::value, session_options{})
      .receive([&](session_info& info) { id = info.id; },
               [&](caf::error& err) {
                 std::fprintf(stderr, "bench_session: create: %s\n", describe(err, sys).c_str());
               });
    ok = !id.empty() && exec_ok(self, *sup, exec_atom::value, session_ref{id, {}}, pass);
    session_create.add(micros_since(t0));
    if (!id.empty())
      self->request(*sup, std::chrono::seconds(60), destroy_atom::value, session_ref{id, {}})
        .receive([](session_stats&) {}, [](caf::error&) {});

    t0 = clock_type::now();
    auto pool = spawn_pool(sys, *fresh_cfg);
    ok = ok && pool && exec_ok(self, *pool, exec_atom::value, pass);
    fresh_sandbox.add(micros_since(t0));
    if (pool)
      caf::anon_send(*pool, shutdown_atom::value);
  }

  // -- exec latency -------------------------------------------------------------------------
  std::string id;
  session_actor session;
  self->request(*sup, std::chrono::seconds(60), session_create_atom::value, session_options{})
    .receive([&](session_info& info) { id = info.id; }, [](caf::error&) {});
  if (!id.empty())
    self->request(*sup, std::chrono::seconds(60), session_get_atom::value, session_ref{id, {}})
      .receive([&](session_actor& s) { session = s; }, [](caf::error&) {});
  ok = ok && session;
  bench::samples in_session;
  bench::samples in_session_direct;
  bench::samples stateless;
  for (int i = 0; ok && i < execs; ++i) {
    auto t0 = clock_type::now();
    ok = exec_ok(self, *sup, exec_atom::value, session_ref{id, {}}, pass);
    in_session.add(micros_since(t0));
    t0 = clock_type::now();
    ok = ok && exec_ok(self, session, exec_atom::value, pass);
    in_session_direct.add(micros_since(t0));
    t0 = clock_type::now();
    ok = ok && exec_ok(self, *sup, exec_atom::value, pass);
    stateless.add(micros_since(t0));
  }
  if (!ok) {
    std::fprintf(stderr, "bench_session: an exec or a create failed\n");
    self->send(*sup, shutdown_atom::value);
    return 1;
  }
  std::printf("session create to first exec done, %d of each, interleaved\n", creates);
  std::printf("%-52s %9s %9s\n", "", "p50", "p99");
  print("session: create + first exec (pass)", session_create, 1000.0, "ms");
  print("fresh exec'd sandbox: spawn pool of 1 + first exec", fresh_sandbox, 1000.0, "ms");
  std::printf("\nexec of `pass`, %d of each, interleaved\n", execs);
  std::printf("%-52s %9s %9s\n", "", "p50", "p99");
  print("in a session, via the supervisor by id", in_session, 1.0, "us");
  print("in a session, to the session's handle", in_session_direct, 1.0, "us");
  print("stateless shared-mode pool, via the supervisor", stateless, 1.0, "us");
  self->send(*sup, shutdown_atom::value);
  return 0;
}
