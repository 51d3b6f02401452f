#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <map>
#include <thread>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "actors/audit/audit_actor.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/stalled_fifo.hpp"
#include "support/temp_dir.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct pool_fixture : test::actor_system_fixture {
  pool_actor spawn(pool_config pc) {
    auto pool = spawn_pool(sys, std::move(pc));
    BOOST_REQUIRE_MESSAGE(pool, (pool ? "" : pool.error().describe()));
    return *pool;
  }
  ~pool_fixture() {
    for (auto& p : pools)
      caf::anon_send(p, shutdown_atom::value);
  }
  pool_actor make(pool_config pc) {
    pools.push_back(spawn(std::move(pc)));
    return pools.back();
  }
  std::vector<pool_actor> pools;
};

exec_request code_request(std::string code, uint64_t id = 0, uint64_t timeout_ms = 0) {
  exec_request req;
  req.code = std::move(code);
  req.exec_id = id;
  req.timeout_ms = timeout_ms;
  return req;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(pool_actor_tests, pool_fixture)

BOOST_AUTO_TEST_CASE(runs_code_and_reports_output) {
  auto pool = make(test_pool());
  auto r = exec_code(pool, "print(6*7)");
  BOOST_TEST((r.error == error_class::ok));
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.stdout_data == "42\n");
  BOOST_TEST(r.stderr_data == "");
  BOOST_TEST(r.worker_id != 0u);
  BOOST_TEST(r.timing.run_us > 0u);
}

BOOST_AUTO_TEST_CASE(exceptions_and_exit_codes) {
  auto pool = make(test_pool());
  auto e = exec_code(pool, "raise ValueError('x')");
  BOOST_TEST((e.error == error_class::exception));
  BOOST_TEST(e.exit_code == 1);
  BOOST_TEST(e.exception.type == "ValueError");
  BOOST_TEST(e.exception.message == "x");
  auto s = exec_code(pool, "import sys; sys.exit(3)");
  BOOST_TEST((s.error == error_class::ok));
  BOOST_TEST(s.exit_code == 3);
}

BOOST_AUTO_TEST_CASE(command_mode) {
  auto pool = make(test_pool());
  exec_request req;
  req.argv = {"/bin/echo", "hi"};
  auto r = exec(pool, req);
  BOOST_TEST(r.stdout_data == "hi\n");
  BOOST_TEST(r.exit_code == 0);
  req.argv = {"/bin/sh", "-c", "echo err >&2; exit 5"};
  auto f = exec(pool, req);
  BOOST_TEST(f.stderr_data == "err\n");
  BOOST_TEST(f.exit_code == 5);
}

BOOST_AUTO_TEST_CASE(empty_request_is_an_error) {
  auto pool = make(test_pool());
  bool failed = false;
  self->request(pool, 10s, exec_atom::value, exec_request{})
    .receive([](exec_result&) {}, [&](caf::error& err) {
      failed = true;
      BOOST_TEST(sys.render(err).find("neither code nor argv") != std::string::npos);
    });
  BOOST_TEST(failed);
}

BOOST_AUTO_TEST_CASE(a_full_queue_answers_busy) {
  auto pc = test_pool(1);
  pc.queue_limit = 1;
  auto pool = make(pc);
  exec_code(pool, "pass"); // the worker is warm
  // 1 runs, 2 waits in the queue, 3 finds the queue full.
  for (uint64_t id : {1u, 2u, 3u})
    self->send(pool, exec_atom::value, code_request("import time; time.sleep(0.5)", id));
  std::map<uint64_t, exec_result> results;
  for (int i = 0; i < 3; ++i)
    self->receive([&](exec_result& r) { results[r.exec_id] = r; },
                  caf::after(30s) >> [] { BOOST_FAIL("no reply"); });
  BOOST_REQUIRE_EQUAL(results.size(), 3u);
  BOOST_TEST((results[1].error == error_class::ok));
  BOOST_TEST((results[2].error == error_class::ok));
  BOOST_TEST((results[3].error == error_class::busy));
  BOOST_TEST(results[3].detail.find("limit 1") != std::string::npos);
  BOOST_TEST(results[2].timing.queue_us > 100'000u); // it waited for 1
}

BOOST_AUTO_TEST_CASE(a_queue_limit_of_0_runs_what_a_ready_worker_takes_and_queues_nothing) {
  auto pc = test_pool(1);
  pc.queue_limit = 0;
  auto pool = make(pc);
  // Until its worker is ready the pool can take nothing (busy, at once);
  // then a ready worker takes each request: nothing waits, nothing is
  // refused.
  exec_result first;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       std::chrono::steady_clock::now() < deadline;) {
    first = exec_code(pool, "print('ran')");
    if (first.error != error_class::busy)
      break;
    BOOST_TEST(first.detail.find("limit 0") != std::string::npos, first.detail);
    std::this_thread::sleep_for(10ms);
  }
  BOOST_TEST((first.error == error_class::ok));
  BOOST_TEST((exec_code(pool, "print('ran')").error == error_class::ok));
  // 1 runs; 2 would have to wait.
  for (uint64_t id : {1u, 2u})
    self->send(pool, exec_atom::value, code_request("import time; time.sleep(0.3)", id));
  std::map<uint64_t, exec_result> results;
  for (int i = 0; i < 2; ++i)
    self->receive([&](exec_result& r) { results[r.exec_id] = r; },
                  caf::after(30s) >> [] { BOOST_FAIL("no reply"); });
  BOOST_REQUIRE_EQUAL(results.size(), 2u);
  BOOST_TEST((results[1].error == error_class::ok));
  BOOST_TEST((results[2].error == error_class::busy));
  BOOST_TEST(results[2].detail.find("limit 0") != std::string::npos, results[2].detail);
}

BOOST_AUTO_TEST_CASE(a_stalled_audit_log_makes_the_pool_answer_busy_until_it_drains) {
  // The audit log is a FIFO nobody reads: its writer stalls, its queue
  // fills, and the audit actor keeps the pool's credits, so the pool stops
  // admitting work instead of letting the audit mailbox grow.
  test::temp_dir dir;
  test::stalled_fifo fifo(dir.file("audit.fifo"), 4096);
  audit_config ac;
  ac.enabled = true;
  ac.events = {"*"};
  ac.file.path = fifo.path();
  ac.file.fsync = fsync_policy::never;
  ac.file.queue_records = 16;
  ac.file.block_timeout_ms = 60000;
  ac.producer_window = 4;
  auto audit = spawn_audit(sys, ac);
  BOOST_REQUIRE(audit);
  auto pc = test_pool(1);
  pc.audit = *audit;
  auto pool = make(pc);
  // Each exec is two records (started, finished); the pipe takes a few.
  exec_result r;
  int admitted = 0;
  for (; admitted < 200; ++admitted) {
    r = exec_code(pool, "pass");
    if (r.error != error_class::ok)
      break;
  }
  BOOST_TEST_MESSAGE("stalled audit: " << admitted << " execs admitted before busy");
  BOOST_REQUIRE((r.error == error_class::busy));
  BOOST_TEST(r.detail.find("audit log is falling behind") != std::string::npos, r.detail);
  BOOST_TEST(admitted >= 1);
  // The reader comes back; once the audit has written everything (the flush
  // returns the credits before it answers), the pool admits work again.
  fifo.drain();
  self->request(*audit, 60s, audit_flush_atom::value)
    .receive([](audit_stats& st) { BOOST_TEST(st.file_dropped == 0u); },
             [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
  auto next = exec_code(pool, "print('admitted')");
  BOOST_TEST((next.error == error_class::ok), next.detail);
  BOOST_TEST(next.stdout_data == "admitted\n");
  caf::anon_send(pool, shutdown_atom::value);
  self->wait_for(pool);
  caf::anon_send_exit(*audit, caf::exit_reason::user_shutdown);
  self->wait_for(*audit);
}

BOOST_AUTO_TEST_CASE(without_its_audit_actor_a_pool_admits_nothing) {
  // An exec the audit cannot record is not run: the pool says why, instead
  // of counting credits that will never come back.
  test::temp_dir dir;
  audit_config ac;
  ac.enabled = true;
  ac.events = {"*"};
  ac.file.path = dir.file("audit.jsonl");
  auto audit = spawn_audit(sys, ac);
  BOOST_REQUIRE(audit);
  auto pc = test_pool(1);
  pc.audit = *audit;
  auto pool = make(pc);
  BOOST_TEST((exec_code(pool, "pass").error == error_class::ok));
  caf::anon_send_exit(*audit, caf::exit_reason::user_shutdown);
  self->wait_for(*audit);
  // The pool hears of it from its monitor, which may come after a request
  // sent now: execs run until it does, and none after.
  exec_result r;
  for (int i = 0; i < 200; ++i) {
    r = exec_code(pool, "print('unrecorded')");
    if (r.error != error_class::ok)
      break;
  }
  BOOST_TEST((r.error == error_class::busy));
  BOOST_TEST(r.stdout_data.empty());
  BOOST_TEST(r.detail.find("the audit actor is down") != std::string::npos, r.detail);
  auto again = exec_code(pool, "print('unrecorded')");
  BOOST_TEST((again.error == error_class::busy));
}

BOOST_AUTO_TEST_CASE(deadline_kills_the_worker_and_the_pool_recovers) {
  auto pool = make(test_pool(1));
  auto first = exec_code(pool, "pass");
  auto r = exec(pool, code_request("while True: pass", 0, 300));
  BOOST_TEST((r.error == error_class::timeout));
  BOOST_TEST(r.exit_code == 124);
  BOOST_TEST(r.detail.find("300 ms") != std::string::npos);
  auto next = exec_code(pool, "print('alive')");
  BOOST_TEST(next.stdout_data == "alive\n");
  BOOST_TEST(next.worker_id != first.worker_id); // a fresh worker
}

BOOST_AUTO_TEST_CASE(output_produced_before_a_timeout_is_kept) {
  auto pool = make(test_pool(1));
  // A warm worker first: the deadline counts from the request, and a worker
  // still starting (slow under sanitizers) would eat it before the print.
  BOOST_REQUIRE(exec_code(pool, "pass").error == error_class::ok);
  auto r = exec(pool, code_request("import sys, time\nprint('before', flush=True)\ntime.sleep(60)",
                                   0, 1500));
  BOOST_TEST((r.error == error_class::timeout));
  BOOST_TEST(r.stdout_data == "before\n");
}

BOOST_AUTO_TEST_CASE(a_dying_worker_is_worker_lost_and_replaced) {
  // Shared mode: the code runs in the harness itself, so its _exit ends the
  // worker (in isolated mode it ends only the exec's own process).
  auto pc = test_pool(1);
  pc.mode = exec_mode::shared;
  auto pool = make(pc);
  auto r = exec_code(pool, "import os; os._exit(9)");
  BOOST_TEST((r.error == error_class::worker_lost));
  BOOST_TEST(r.detail.find("during the exec") != std::string::npos, r.detail);
  auto next = exec_code(pool, "print(1)");
  BOOST_TEST(next.stdout_data == "1\n");
}

BOOST_AUTO_TEST_CASE(output_caps_truncate_without_killing) {
  auto pc = test_pool(1);
  pc.stdout_limit = 1000;
  auto pool = make(pc);
  auto r = exec_code(pool, "print('x' * 5000)");
  BOOST_TEST((r.error == error_class::ok));
  BOOST_TEST(r.stdout_data.size() == 1000u);
  BOOST_TEST(r.stdout_truncated);
  auto next = exec_code(pool, "print('y')");
  BOOST_TEST(next.worker_id == r.worker_id);
  BOOST_TEST(!next.stdout_truncated);
}

BOOST_AUTO_TEST_CASE(large_output_streams_through_a_small_ring) {
  // 8 MiB through a 64 KiB ring: the harness blocks on a full ring many
  // times, and each drain by the pool must wake it again.
  auto pc = test_pool(1);
  pc.ring_capacity = 64u << 10;
  pc.code_limit = 16u << 10;
  pc.stdout_limit = 16u << 20;
  auto pool = make(pc);
  auto start = std::chrono::steady_clock::now();
  auto r = exec_code(pool, "import sys\nfor i in range(8192): sys.stdout.write('%1023d\\n' % i)");
  auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST((r.error == error_class::ok));
  BOOST_REQUIRE_EQUAL(r.stdout_data.size(), 8192u * 1024u);
  BOOST_TEST(!r.stdout_truncated);
  BOOST_TEST(r.stdout_data.substr(r.stdout_data.size() - 5) == "8191\n");
  BOOST_TEST_MESSAGE("8 MiB through a 64 KiB ring in "
                     << std::chrono::duration_cast<std::chrono::milliseconds>(took).count()
                     << " ms");
}

BOOST_AUTO_TEST_CASE(code_over_the_limit_is_refused_before_dispatch) {
  auto pc = test_pool(1);
  pc.code_limit = 100;
  auto pool = make(pc);
  auto r = exec_code(pool, std::string(200, '#'));
  BOOST_TEST((r.error == error_class::limit_exceeded));
  BOOST_TEST(r.worker_id == 0u); // never reached a worker
  BOOST_TEST(r.detail.find("200 bytes") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(workers_are_recycled_after_n_execs) {
  auto pc = test_pool(1);
  pc.recycle_after = 2;
  auto pool = make(pc);
  auto a = exec_code(pool, "pass");
  auto b = exec_code(pool, "pass");
  auto c = exec_code(pool, "pass");
  BOOST_TEST(a.worker_id == b.worker_id);
  BOOST_TEST(c.worker_id != b.worker_id);
}

BOOST_AUTO_TEST_CASE(globals_do_not_leak_between_execs) {
  auto pool = make(test_pool(1));
  exec_code(pool, "leak = 1");
  auto r = exec_code(pool, "print(leak)");
  BOOST_TEST((r.error == error_class::exception));
  BOOST_TEST(r.exception.type == "NameError");
}

// The default mode isolates execs: what one exec leaves in the interpreter
// (an attribute hung on a module) is gone for the next on the same worker. Shared mode is the
// opt-in for one trust domain, and there the interpreter's state carries over.
BOOST_AUTO_TEST_CASE(the_default_mode_isolates_execs_and_shared_mode_does_not) {
  BOOST_TEST((pool_config{}.mode == exec_mode::isolated));
  const char* leave = "import sys\nsys.castellan_probe = 1\n";
  const char* look = "import sys\nprint(hasattr(sys, 'castellan_probe'))\n";
  auto isolated = make(test_pool(1));
  auto a = exec_code(isolated, leave);
  auto b = exec_code(isolated, look);
  BOOST_TEST(a.worker_id == b.worker_id); // the same worker served both
  BOOST_TEST(b.stdout_data == "False\n");
  auto pc = test_pool(1);
  pc.name = "shared";
  pc.mode = exec_mode::shared;
  auto shared = make(pc);
  auto c = exec_code(shared, leave);
  auto d = exec_code(shared, look);
  BOOST_TEST(c.worker_id == d.worker_id);
  BOOST_TEST(d.stdout_data == "True\n");
}

BOOST_AUTO_TEST_CASE(status_counts_workers_and_execs) {
  auto pool = make(test_pool(2));
  exec_code(pool, "pass");
  exec_code(pool, "pass");
  pool_status st;
  self->request(pool, 10s, status_atom::value).receive([&](pool_status& s) { st = s; },
                                                       [](caf::error&) { BOOST_FAIL("status"); });
  BOOST_TEST(st.size == 2u);
  BOOST_TEST(st.completed == 2u);
  BOOST_TEST(st.spawned == 2u);
  BOOST_TEST(st.busy == 0u);
}

BOOST_AUTO_TEST_CASE(missing_interpreter_is_a_clear_error) {
  auto pc = test_pool(1);
  pc.python = "/nonexistent/python3";
  auto pool = spawn_pool(sys, pc);
  BOOST_REQUIRE(!pool);
  BOOST_TEST(pool.error().describe().find("/nonexistent/python3") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
