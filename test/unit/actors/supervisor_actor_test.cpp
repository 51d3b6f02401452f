#include <boost/test/unit_test.hpp>

#include <chrono>
#include <csignal>
#include <thread>
#include <vector>

#include <signal.h>

#include "support/actor_system_fixture.hpp"
#include "support/process_scan.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct supervisor_fixture : test::actor_system_fixture {
  supervisor_actor start(std::vector<pool_config> pools) {
    supervisor_config sc;
    sc.pools = std::move(pools);
    auto sup = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(sup, (sup ? "" : sup.error().describe()));
    handle = *sup;
    return handle;
  }
  /// Subscribes the test to the supervisor's worker state events.
  void subscribe(const supervisor_actor& sup) {
    self->send(sup, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  }

  /// Waits for a worker of `pool` to enter `want` (30 s safety net); other
  /// events are passed over.
  void wait_for_state(worker_state want, const std::string& pool) {
    for (bool got = false; !got;)
      self->receive([&](worker_state_event& ev) { got = ev.state == want && ev.pool == pool; },
                    caf::after(30s) >> [&] {
                      BOOST_FAIL("no worker of pool " << pool << " entered state "
                                                      << to_string(want) << " in 30 s");
                    });
  }

  ~supervisor_fixture() {
    if (handle)
      caf::anon_send(handle, shutdown_atom::value);
  }
  supervisor_actor handle;
};

exec_request code_request(std::string code, std::string pool = {}) {
  exec_request req;
  req.code = std::move(code);
  req.pool = std::move(pool);
  return req;
}

pool_config named(std::string name) {
  auto pc = test::actor_system_fixture::test_pool(1);
  pc.name = std::move(name);
  return pc;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(supervisor_actor_tests, supervisor_fixture)

BOOST_AUTO_TEST_CASE(routes_to_the_default_and_to_named_pools) {
  auto sup = start({named("alpha"), named("beta")});
  exec_request req;
  req.code = "print('a')";
  auto a = exec(sup, req);
  BOOST_TEST(a.stdout_data == "a\n");
  BOOST_TEST(a.exec_id != 0u); // assigned by the supervisor
  req.pool = "beta";
  auto b = exec(sup, req);
  BOOST_TEST(b.stdout_data == "a\n");
  BOOST_TEST(b.exec_id != a.exec_id);
  req.pool = "gamma";
  bool failed = false;
  self->request(sup, 10s, exec_atom::value, req)
    .receive([](exec_result&) {}, [&](caf::error& err) {
      failed = true;
      BOOST_TEST(sys.render(err).find("no pool named 'gamma'") != std::string::npos);
    });
  BOOST_TEST(failed);
}

BOOST_AUTO_TEST_CASE(subscribers_see_every_state_transition) {
  auto sup = start({named("p")});
  self->send(sup, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  // Wait for the worker to be ready, then run one exec and watch it go
  // running → ready.
  std::vector<worker_state> seen;
  auto wait_for = [&](worker_state want) {
    for (;;) {
      bool got = false;
      self->receive([&](worker_state_event& ev) {
                      BOOST_TEST(ev.pool == "p");
                      BOOST_TEST(ev.pid > 0);
                      seen.push_back(ev.state);
                      got = ev.state == want;
                    },
                    caf::after(30s) >> [&] { BOOST_FAIL("no state event"); });
      if (got)
        return;
    }
  };
  wait_for(worker_state::ready);
  self->send(sup, exec_atom::value, code_request("pass"));
  wait_for(worker_state::running);
  // The result and the ready event both arrive; take them in any order.
  bool result = false, ready = false;
  while (!result || !ready)
    self->receive([&](exec_result&) { result = true; },
                  [&](worker_state_event& ev) { ready = ready || ev.state == worker_state::ready; },
                  caf::after(30s) >> [] { BOOST_FAIL("no result"); });
  BOOST_TEST((seen.front() == worker_state::starting));
}

BOOST_AUTO_TEST_CASE(status_lists_every_pool) {
  auto sup = start({named("one"), named("two")});
  exec(sup, code_request("pass", "two"));
  std::vector<pool_status> st;
  self->request(sup, 10s, status_atom::value)
    .receive([&](std::vector<pool_status>& s) { st = s; }, [](caf::error&) { BOOST_FAIL("x"); });
  BOOST_REQUIRE_EQUAL(st.size(), 2u);
  BOOST_TEST(st[0].name == "one");
  BOOST_TEST(st[1].name == "two");
  BOOST_TEST(st[1].completed == 1u);
}

BOOST_AUTO_TEST_CASE(a_crashed_pool_is_restarted) {
  auto sup = start({named("p")});
  subscribe(sup);
  wait_for_state(worker_state::ready, "p");
  pool_actor pool;
  self->request(sup, 10s, get_pool_atom::value, std::string("p"))
    .receive([&](pool_actor& p) { pool = p; }, [](caf::error&) { BOOST_FAIL("get_pool"); });
  BOOST_REQUIRE(pool);
  self->send_exit(pool, caf::exit_reason::kill);
  // The supervisor sees the pool go down and starts a new one, whose first
  // worker announces itself: wait for that event, not for a guessed while.
  wait_for_state(worker_state::starting, "p");
  pool_actor again;
  self->request(sup, 10s, get_pool_atom::value, std::string("p"))
    .receive([&](pool_actor& p) { again = p; }, [](caf::error&) { BOOST_FAIL("get_pool"); });
  BOOST_REQUIRE(again);
  BOOST_TEST((again != pool));
  auto r = exec(sup, code_request("print('back')"));
  BOOST_TEST(r.stdout_data == "back\n");
}

BOOST_AUTO_TEST_CASE(bad_configurations_are_refused) {
  supervisor_config empty;
  BOOST_TEST(!spawn_supervisor(sys, empty));
  supervisor_config twice;
  twice.pools = {named("x"), named("x")};
  auto r = spawn_supervisor(sys, twice);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().message.find("used twice") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(cancel_is_routed_to_the_pool_running_the_exec) {
  auto sup = start({named("alpha"), named("beta")});
  subscribe(sup);
  exec_request req;
  req.code = "import time\nprint('running', flush=True)\ntime.sleep(60)";
  req.pool = "beta";
  req.exec_id = 77;
  self->send(sup, exec_atom::value, req);
  auto cancel = [&](uint64_t id) {
    cancel_reply out;
    self->request(sup, 10s, cancel_atom::value, id)
      .receive([&](cancel_reply& r) { out = r; },
               [&](caf::error& e) { BOOST_FAIL("cancel: " << sys.render(e)); });
    return out;
  };
  // Once beta's worker reports running (this is the only exec there), the
  // cancel finds the exec running.
  wait_for_state(worker_state::running, "beta");
  auto reply = cancel(77);
  BOOST_TEST((reply.outcome == cancel_outcome::cancelled_running), reply.detail);
  BOOST_TEST(reply.pool == "beta");
  exec_result r;
  for (bool got = false; !got;)
    self->receive(
      [&](exec_result& x) {
        r = std::move(x);
        got = true;
      },
      [](worker_state_event&) {},
      caf::after(30s) >> [] { BOOST_FAIL("no result within 30 s of the cancel"); });
  BOOST_TEST(r.exec_id == 77u);
  BOOST_TEST((r.error == error_class::cancelled));
  BOOST_TEST(r.exit_code == 125);
  BOOST_TEST((cancel(77).outcome == cancel_outcome::already_finished));
  BOOST_TEST((cancel(12345).outcome == cancel_outcome::unknown));
  // A client-chosen id still in flight is refused rather than confused.
  exec_request again;
  again.code = "import time; time.sleep(5)";
  again.exec_id = 78;
  self->send(sup, exec_atom::value, again);
  bool refused = false;
  self->request(sup, 10s, exec_atom::value, again)
    .receive([&](exec_result&) {}, [&](caf::error&) { refused = true; });
  BOOST_TEST(refused);
  BOOST_TEST((cancel(78).outcome != cancel_outcome::unknown));
}

namespace {

/// Code that runs until the test sends its task SIGUSR1.
std::string held_code(const std::string& tag) {
  return test::python_set_task_name(tag) +
         "import signal\n"
         "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
         "print('waiting', flush=True)\n"
         "signal.sigwait({signal.SIGUSR1})\n"
         "print('finished')\n";
}

/// The tasks running `held_code(tag)`, once one waits in rt_sigtimedwait.
std::vector<pid_t> wait_for_held(const std::string& tag) {
  std::vector<pid_t> tasks;
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((tasks = test::tasks_named(tag)).empty()) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline, "the exec never started");
    std::this_thread::sleep_for(2ms);
  }
  BOOST_REQUIRE(test::wait_until_task_in_syscall(tag, 128 /* rt_sigtimedwait */));
  return tasks;
}

} // namespace

BOOST_AUTO_TEST_CASE(reconfigure_adds_removes_resizes_and_replaces_pools) {
  auto sup = start({named("a"), named("b"), named("d")});
  // Held on b, which the change removes: answered once, with its output.
  const std::string tag = test::unique_task_name("cksup");
  self->send(sup, exec_atom::value, code_request(held_code(tag), "b"));
  auto tasks = wait_for_held(tag);

  auto a2 = named("a");
  a2.size = 2;
  auto d2 = named("d");
  d2.default_timeout_ms = 1234;
  pools_change change;
  self->request(sup, 60s, reconfigure_atom::value, std::vector<pool_config>{a2, named("c"), d2})
    .receive([&](pools_change& c) { change = c; },
             [&](caf::error& e) { BOOST_FAIL("reconfigure: " << sys.render(e)); });
  BOOST_TEST(change.added == std::vector<std::string>{"c"});
  BOOST_TEST(change.removed == std::vector<std::string>{"b"});
  BOOST_TEST(change.resized == std::vector<std::string>{"a"});
  BOOST_TEST(change.replaced == std::vector<std::string>{"d"});
  BOOST_TEST(!change.default_changed);
  BOOST_TEST(describe(change) == "added c; removed b; resized a; replaced d");

  // b admits nothing new; a, c and d run.
  bool refused = false;
  self->request(sup, 10s, exec_atom::value, code_request("print(1)", "b"))
    .receive([](exec_result&) {}, [&](caf::error& e) {
      refused = sys.render(e).find("no pool named 'b'") != std::string::npos;
    });
  BOOST_TEST(refused);
  BOOST_TEST(exec(sup, code_request("print('c')", "c")).stdout_data == "c\n");
  BOOST_TEST(exec(sup, code_request("print('d')", "d")).stdout_data == "d\n");
  std::vector<pool_status> st;
  self->request(sup, 10s, status_atom::value)
    .receive([&](std::vector<pool_status>& s) { st = s; }, [](caf::error&) { BOOST_FAIL("x"); });
  BOOST_REQUIRE_EQUAL(st.size(), 3u);
  BOOST_TEST(st[0].name == "a");
  BOOST_TEST(st[0].size == 2u);
  BOOST_TEST(st[1].name == "c");
  BOOST_TEST(st[2].name == "d");

  // The held exec on the retired b finishes: one answer, with all its output.
  for (pid_t t : tasks)
    ::kill(t, SIGUSR1);
  int answers = 0;
  exec_result held;
  self->receive([&](exec_result& r) { held = r; ++answers; },
                caf::after(30s) >> [] { BOOST_FAIL("the held exec was not answered"); });
  self->receive([&](exec_result&) { ++answers; }, caf::after(200ms) >> [] {});
  BOOST_TEST(answers == 1);
  BOOST_TEST(held.stdout_data == "waiting\nfinished\n");
  BOOST_TEST((held.error == error_class::ok));
}

BOOST_AUTO_TEST_CASE(a_crashed_pools_execs_are_answered_lost_and_its_successor_starts_clean) {
  auto sup = start({named("p"), named("q")});
  // An exec in flight on p when p crashes: answered worker_lost by the
  // supervisor (the dead pool never answers), never run by its successor.
  const std::string tag = test::unique_task_name("cksrs");
  auto held = self->request(sup, caf::infinite, exec_atom::value, code_request(held_code(tag), "p"));
  wait_for_held(tag);
  subscribe(sup);
  auto pool_of = [&](const std::string& name) {
    pool_actor out;
    self->request(sup, 10s, get_pool_atom::value, name)
      .receive([&](pool_actor& p) { out = p; }, [](caf::error&) { BOOST_FAIL("get_pool"); });
    return out;
  };
  const auto crashed = pool_of("p");
  self->send_exit(crashed, caf::exit_reason::kill);
  exec_result lost;
  held.receive([&](exec_result& r) { lost = r; },
               [&](caf::error& e) { BOOST_FAIL("answered with an error: " << sys.render(e)); });
  BOOST_TEST((lost.error == error_class::worker_lost));
  BOOST_TEST(lost.detail.find("pool 'p' went down") != std::string::npos, lost.detail);
  BOOST_TEST(lost.detail.find("it was not run again") != std::string::npos, lost.detail);
  wait_for_state(worker_state::ready, "p");
  const auto restarted = pool_of("p");
  BOOST_REQUIRE(restarted);
  BOOST_TEST((restarted != crashed));
  // Removing p now stops the new pool at once: nothing of its own is in
  // flight. Counting the crashed pool's exec would keep it retiring forever.
  self->monitor(restarted);
  self->request(sup, 60s, reconfigure_atom::value, std::vector<pool_config>{named("q")})
    .receive([](pools_change&) {},
             [&](caf::error& e) { BOOST_FAIL("reconfigure: " << sys.render(e)); });
  bool stopped = false;
  for (auto deadline = std::chrono::steady_clock::now() + 30s;
       !stopped && std::chrono::steady_clock::now() < deadline;)
    self->receive([&](caf::down_msg& d) { stopped = d.source == restarted.address(); },
                  [](worker_state_event&) {}, caf::after(1s) >> [] {});
  BOOST_TEST(stopped, "the restarted pool p was not stopped when the reconfigure removed it");
}

BOOST_AUTO_TEST_CASE(a_reconfigure_that_cannot_apply_changes_nothing) {
  auto sup = start({named("a"), named("b")});
  auto broken = named("new");
  broken.python = "/nonexistent/python3";
  auto refuse = [&](std::vector<pool_config> pools, const std::string& why) {
    bool refused = false;
    self->request(sup, 60s, reconfigure_atom::value, std::move(pools))
      .receive([](pools_change&) {}, [&](caf::error& e) {
        refused = true;
        BOOST_TEST(sys.render(e).find(why) != std::string::npos, sys.render(e));
      });
    BOOST_TEST(refused);
  };
  refuse({named("a"), broken}, "nonexistent");
  refuse({}, "no pools");
  refuse({named("x"), named("x")}, "used twice");
  std::vector<pool_status> st;
  self->request(sup, 10s, status_atom::value)
    .receive([&](std::vector<pool_status>& s) { st = s; }, [](caf::error&) { BOOST_FAIL("x"); });
  BOOST_REQUIRE_EQUAL(st.size(), 2u);
  BOOST_TEST(st[0].name == "a");
  BOOST_TEST(st[1].name == "b");
  BOOST_TEST(exec(sup, code_request("print('b')", "b")).stdout_data == "b\n");
  // The same list again changes nothing; a new first pool is the default.
  pools_change same;
  self->request(sup, 60s, reconfigure_atom::value, std::vector<pool_config>{named("a"), named("b")})
    .receive([&](pools_change& c) { same = c; }, [](caf::error&) { BOOST_FAIL("same"); });
  BOOST_TEST(describe(same) == "no pool changed");
  pools_change swapped;
  self->request(sup, 60s, reconfigure_atom::value, std::vector<pool_config>{named("b"), named("a")})
    .receive([&](pools_change& c) { swapped = c; }, [](caf::error&) { BOOST_FAIL("swap"); });
  BOOST_TEST(swapped.default_changed);
  exec_request any;
  any.code = "print(1)";
  self->request(sup, 10s, get_pool_atom::value, std::string())
    .receive([](pool_actor&) {}, [](caf::error&) { BOOST_FAIL("get_pool"); });
  BOOST_TEST(exec(sup, any).stdout_data == "1\n");
}

BOOST_AUTO_TEST_SUITE_END()
