// The pool's kill paths and execution modes with real workers: cancel
// (running, queued, finished, unknown), the ring-timer deadline in both
// modes, OOM, tasks left behind, and what fork mode keeps from leaking.

#include <boost/test/unit_test.hpp>

#include <sys/syscall.h>

#include <chrono>
#include <map>
#include <string>

#include "support/pool_fixture.hpp"
#include "support/process_scan.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct kill_fixture : test::pool_fixture {
  pool_actor make_mode(exec_mode mode, uint32_t size = 1) {
    auto pc = test_pool(size);
    pc.mode = mode;
    // Each pool its own name: the events of an earlier pool stay in the
    // mailbox, and wait_busy must not take them for this one's.
    pc.name = "kill-" + std::to_string(names.size());
    pc.listener = caf::actor_cast<worker_state_listener>(self);
    auto pool = make(pc);
    names[pool.address()] = pc.name;
    return pool;
  }
  pool_status status(const pool_actor& pool) {
    pool_status st;
    self->request(pool, 10s, status_atom::value)
      .receive([&](pool_status& s) { st = s; }, [](caf::error&) { BOOST_FAIL("status"); });
    return st;
  }
  /// Waits until a worker of `pool` reports running (the test is the
  /// pool's state listener, see make_mode; 30 s safety net).
  void wait_busy(const pool_actor& pool) {
    for (bool running = false; !running;)
      self->receive(
          [&](worker_state_event& ev) {
            running = ev.pool == names[pool.address()] && ev.state == worker_state::running;
          },
          caf::after(30s) >> [] { BOOST_FAIL("no worker started the exec within 30 s"); });
    BOOST_TEST(status(pool).busy >= 1u);
  }
  std::map<caf::actor_addr, std::string> names;

  cancel_reply cancel(const pool_actor& pool, uint64_t exec_id) {
    cancel_reply out;
    self->request(pool, 10s, cancel_atom::value, exec_id)
      .receive([&](cancel_reply& r) { out = r; },
               [&](caf::error& e) { BOOST_FAIL("cancel: " << sys.render(e)); });
    return out;
  }
  exec_result receive_result() {
    exec_result out;
    self->receive([&](exec_result& r) { out = std::move(r); },
                  caf::after(30s) >> [] { BOOST_FAIL("no result"); });
    return out;
  }
};

exec_request request(std::string code, uint64_t id, uint64_t timeout_ms = 0) {
  exec_request req;
  req.code = std::move(code);
  req.exec_id = id;
  req.timeout_ms = timeout_ms;
  return req;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(pool_kill_tests, kill_fixture)

BOOST_AUTO_TEST_CASE(cancel_kills_a_running_exec_with_125_and_keeps_its_output) {
  for (auto mode : {exec_mode::shared, exec_mode::isolated}) {
    BOOST_TEST_CONTEXT("mode " << to_string(mode)) {
      auto pool = make_mode(mode);
      const std::string tag = test::unique_task_name("ckcn");
      self->send(pool, exec_atom::value,
                 request(test::python_set_task_name(tag) +
                           "import time\nprint('so far', flush=True)\ntime.sleep(60)",
                         41));
      wait_busy(pool);
      // Once the named task sleeps in clock_nanosleep (time.sleep), its
      // print has returned and the tag is visible (the leftover check below
      // can fail). Then wait until the output is in the ring.
      BOOST_REQUIRE_MESSAGE(test::wait_until_task_in_syscall(tag, SYS_clock_nanosleep),
                            "the exec's task " << tag << " was not seen in time.sleep within 30 s");
      if (mode == exec_mode::isolated)
        BOOST_REQUIRE_MESSAGE(test::wait_until_harness_drained(tag),
                              "the harness did not forward the exec's output within 30 s");
      auto reply = cancel(pool, 41);
      BOOST_TEST((reply.outcome == cancel_outcome::cancelled_running), reply.detail);
      auto r = receive_result();
      BOOST_TEST((r.error == error_class::cancelled));
      BOOST_TEST(r.exit_code == 125);
      BOOST_TEST(r.exec_id == 41u);
      BOOST_TEST(r.stdout_data == "so far\n");
      // A second cancel finds it finished; the pool serves the next exec.
      BOOST_TEST((cancel(pool, 41).outcome == cancel_outcome::already_finished));
      BOOST_TEST(exec_code(pool, "print('next')").stdout_data == "next\n");
      BOOST_TEST(test::wait_until_no_task_named(tag).empty());
    }
  }
}

BOOST_AUTO_TEST_CASE(cancel_of_a_queued_exec_answers_it_without_running_it) {
  auto pool = make_mode(exec_mode::shared);
  self->send(pool, exec_atom::value, request("import time; time.sleep(60)", 1, 30000));
  self->send(pool, exec_atom::value, request("print('never')", 2));
  wait_busy(pool);
  auto reply = cancel(pool, 2);
  BOOST_TEST((reply.outcome == cancel_outcome::cancelled_queued), reply.detail);
  auto queued = receive_result();
  BOOST_TEST(queued.exec_id == 2u);
  BOOST_TEST((queued.error == error_class::cancelled));
  BOOST_TEST(queued.exit_code == 125);
  BOOST_TEST(queued.stdout_data == "");
  BOOST_TEST((cancel(pool, 1).outcome == cancel_outcome::cancelled_running));
  BOOST_TEST(receive_result().exec_id == 1u);
}

BOOST_AUTO_TEST_CASE(cancel_of_an_unknown_exec_is_a_no_op_answer) {
  auto pool = make_mode(exec_mode::shared);
  auto reply = cancel(pool, 999);
  BOOST_TEST((reply.outcome == cancel_outcome::unknown));
  BOOST_TEST(reply.detail.find("999") != std::string::npos, reply.detail);
  BOOST_TEST(exec_code(pool, "print(1)").stdout_data == "1\n");
}

BOOST_AUTO_TEST_CASE(the_ring_timer_deadline_kills_the_whole_tree_in_both_modes) {
  for (auto mode : {exec_mode::shared, exec_mode::isolated}) {
    BOOST_TEST_CONTEXT("mode " << to_string(mode)) {
      auto pool = make_mode(mode);
      const std::string tag = test::unique_task_name("ckdl");
      auto r = exec(pool, request(test::python_set_task_name(tag) +
                                    "import os, signal, threading, time\n"
                                    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
                                    "threading.Thread(target=time.sleep, args=(60,)).start()\n"
                                    "if os.fork() == 0:\n"
                                    "    os.setsid()\n"
                                    "    time.sleep(60)\n"
                                    "while True: pass\n",
                                  0, 300));
      BOOST_TEST((r.error == error_class::timeout));
      BOOST_TEST(r.exit_code == 124);
      // The replacement serves the next exec only after the old worker was
      // reaped: by then its pid namespace and cgroup are gone.
      BOOST_TEST(exec_code(pool, "print('fresh')").stdout_data == "fresh\n");
      auto left = test::wait_until_no_task_named(tag);
      BOOST_TEST(left.empty(), left.size() << " task(s) survived");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_exec_that_hits_the_memory_limit_is_oom) {
  for (auto mode : {exec_mode::shared, exec_mode::isolated}) {
    BOOST_TEST_CONTEXT("mode " << to_string(mode)) {
      auto pc = test_pool(1);
      pc.mode = mode;
      pc.limits.memory_bytes = 128ull << 20;
      auto pool = make(pc);
      auto r = exec_code(pool, "b = []\nwhile True: b.append(bytearray(1 << 20))\n");
      BOOST_TEST((r.error == error_class::oom), to_string(r.error) << ": " << r.detail);
      BOOST_TEST(exec_code(pool, "print('after')").stdout_data == "after\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(a_fork_bomb_is_contained_and_the_worker_replaced) {
  for (auto mode : {exec_mode::shared, exec_mode::isolated}) {
    BOOST_TEST_CONTEXT("mode " << to_string(mode)) {
      auto pool = make_mode(mode);
      auto first = exec_code(pool, "import os\nwhile True: os.fork()\n");
      // The pids limit stops it: fork fails in the exec's process.
      BOOST_TEST((first.error == error_class::exception), to_string(first.error) << first.detail);
      BOOST_TEST(first.exception.type == "BlockingIOError");
      auto next = exec_code(pool, "print('clean')");
      BOOST_TEST(next.stdout_data == "clean\n");
      BOOST_TEST((next.error == error_class::ok));
    }
  }
}

BOOST_AUTO_TEST_CASE(a_process_left_running_gets_the_worker_replaced) {
  auto pool = make_mode(exec_mode::shared);
  auto first = exec_code(pool, "import os, time\nif os.fork() == 0:\n    time.sleep(60)\n");
  BOOST_TEST((first.error == error_class::ok));
  auto next = exec_code(pool, "print('x')");
  BOOST_TEST(next.worker_id != first.worker_id);
}

BOOST_AUTO_TEST_CASE(isolated_mode_leaks_no_state_between_execs) {
  auto pool = make_mode(exec_mode::isolated);
  auto a = exec_code(pool,
                     "import sys, types, threading, time\n"
                     "sys.modules['castellan_leak'] = types.ModuleType('castellan_leak')\n"
                     "import builtins\nbuiltins.castellan_leak = 1\n"
                     "global_leak = 1\n"
                     "f = open('/tmp/leak', 'w')\n"
                     "threading.Thread(target=time.sleep, args=(0.5,), daemon=True).start()\n"
                     "print('set')\n");
  BOOST_TEST(a.stdout_data == "set\n", a.stderr_data);
  auto b = exec_code(pool,
                     "import sys, os, threading, builtins\n"
                     "print('castellan_leak' in sys.modules, hasattr(builtins, 'castellan_leak'),\n"
                     "      'global_leak' in globals(), threading.active_count(),\n"
                     "      any(os.readlink('/proc/self/fd/' + fd) == '/tmp/leak'\n"
                     "          for fd in os.listdir('/proc/self/fd')\n"
                     "          if os.path.exists('/proc/self/fd/' + fd)))\n");
  BOOST_TEST(b.stdout_data == "False False False 1 False\n", b.stdout_data << b.stderr_data);
  BOOST_TEST(b.worker_id == a.worker_id); // the same warm zygote served both
}

BOOST_AUTO_TEST_CASE(reuse_mode_still_resets_globals) {
  auto pool = make_mode(exec_mode::shared);
  exec_code(pool, "leak = 1");
  auto r = exec_code(pool, "print('leak' in globals())");
  BOOST_TEST(r.stdout_data == "False\n");
}

BOOST_AUTO_TEST_SUITE_END()
