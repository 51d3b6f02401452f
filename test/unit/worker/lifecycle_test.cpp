/// @file lifecycle_test.cpp
/// READY, SHUTDOWN, signals, reaping, broken wires, modes.

#include <boost/test/unit_test.hpp>

#include <signal.h>
#include <sys/syscall.h>

#include <cstdio>
#include <thread>

#include "worker_process.hpp"

using namespace castellan;
using namespace castellan::test;
using nlohmann::json;

namespace {

/// Waits until /proc/<pid> is gone (reaped), up to `timeout` (a safety net:
/// whoever reaps it is not ours to wait on).
bool gone_within(pid_t pid, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (process_exists(pid)) {
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_lifecycle)

BOOST_AUTO_TEST_CASE(ready_payload) {
  worker_process w;
  const auto& ready = w.ready();
  BOOST_TEST(ready.size() == 3u);
  BOOST_TEST(ready["mode"] == "reuse");
  const std::string version = ready["interpreter"];
  BOOST_TEST(version.rfind("3.", 0) == 0);
  const pid_t harness = w.harness_pid();
  BOOST_TEST(harness != w.pid());
  BOOST_TEST(parent_of(harness) == w.pid());
  auto r = w.run_code("import os\nprint(os.getpid())");
  BOOST_TEST(r.out == std::to_string(harness) + "\n");
}

BOOST_AUTO_TEST_CASE(shutdown_exits_0) {
  worker_process w;
  const pid_t harness = w.harness_pid();
  w.send(ipc::message_type::shutdown, 0, "");
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 0);
  BOOST_TEST(gone_within(harness, 30s), "harness " << harness << " still there after 30 s");
}

BOOST_AUTO_TEST_CASE(sigterm_ends_worker_and_harness) {
  worker_process w;
  const pid_t harness = w.harness_pid();
  BOOST_REQUIRE(::kill(w.pid(), SIGTERM) == 0);
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 128 + SIGTERM);
  // The worker reaped the harness before exiting: no zombie left behind.
  BOOST_TEST(!process_exists(harness));
}

BOOST_AUTO_TEST_CASE(sigterm_while_code_runs) {
  worker_process w;
  w.send(ipc::message_type::code, 5, "import time\nprint('sleeping', flush=True)\ntime.sleep(60)");
  auto f = w.next_frame(10s);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST(f->payload == "sleeping\n");
  const pid_t harness = w.harness_pid();
  BOOST_REQUIRE(::kill(w.pid(), SIGTERM) == 0);
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 143);
  BOOST_TEST(!process_exists(harness));
}

BOOST_AUTO_TEST_CASE(sigint_interrupts_code_and_the_harness_goes_on) {
  worker_process w;
  // User code that ignores SIGINT does not keep the next request from
  // being interruptible: the harness reinstalls its handler.
  auto r = w.run_code("import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)");
  require_complete(r);
  w.send(ipc::message_type::code, 7,
         "import time\nprint('sleeping', flush=True)\ntime.sleep(60)\nprint('not reached')");
  auto f = w.next_frame(10s);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST(f->payload == "sleeping\n");
  // The frame comes from inside print(): the traceback names line 3 only if
  // the signal comes once the code sleeps there.
  BOOST_REQUIRE_MESSAGE(wait_until_in_syscall(w.harness_pid(), SYS_clock_nanosleep, 30s),
                        "the code was not seen in time.sleep within 30 s");
  BOOST_REQUIRE(::kill(w.pid(), SIGINT) == 0);
  f = w.next_frame(10s);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST_INFO("frame " << ipc::to_string(f->type) << ": " << f->payload);
  BOOST_REQUIRE((f->type == ipc::message_type::result));
  BOOST_TEST(f->request_id == 7u);
  auto result = json::parse(f->payload);
  BOOST_TEST(result["exit_code"] == 1);
  BOOST_TEST(result["exception"]["type"] == "KeyboardInterrupt");
  BOOST_TEST(contains(result["exception"]["traceback"], "File \"<exec>\", line 3"));
  r = w.run_code("print('alive')");
  BOOST_TEST(r.out == "alive\n");
}

BOOST_AUTO_TEST_CASE(sigint_during_heavy_output_keeps_the_stream_intact) {
  worker_process w;
  for (uint32_t round = 0; round < 5; ++round) {
    const uint32_t id = 100 + round;
    w.send(ipc::message_type::code, id,
           "import sys\ni = 0\nwhile True:\n    sys.stdout.write('%09d\\n' % i)\n    i += 1");
    std::string out;
    int frames = 0;
    std::optional<json> result;
    while (!result) {
      auto f = w.next_frame(10s);
      BOOST_REQUIRE_MESSAGE(f.has_value(), "no frame; stderr: " + w.diagnostics());
      BOOST_REQUIRE(f->request_id == id);
      if (f->type == ipc::message_type::stdout_data) {
        out += f->payload;
        if (++frames == 2 + static_cast<int>(round))
          BOOST_REQUIRE(::kill(w.pid(), SIGINT) == 0);
      } else {
        BOOST_REQUIRE((f->type == ipc::message_type::result));
        result = json::parse(f->payload);
      }
    }
    BOOST_TEST((*result)["exception"]["type"] == "KeyboardInterrupt");
    // Every line in order, none twice, none missing; the last one may be
    // cut where the interrupt hit.
    std::size_t pos = 0;
    bool intact = true;
    char line[16];
    for (int i = 0; intact && pos < out.size(); ++i) {
      std::snprintf(line, sizeof line, "%09d\n", i);
      const std::size_t n = std::min<std::size_t>(10, out.size() - pos);
      intact = out.compare(pos, n, line, n) == 0;
      pos += n;
    }
    BOOST_TEST(intact);
    BOOST_TEST(out.size() > 100000u);
    auto r = w.run_code("print('alive')");
    BOOST_TEST(r.out == "alive\n");
  }
}

BOOST_AUTO_TEST_CASE(sigint_while_idle_ends_the_worker) {
  worker_process w;
  BOOST_REQUIRE(::kill(w.pid(), SIGINT) == 0);
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 128 + SIGINT);
}

BOOST_AUTO_TEST_CASE(orphans_are_reaped) {
  worker_process w;
  // A grandchild whose parent exits becomes the worker's child (subreaper)
  // and is reaped when it ends: no zombie.
  auto r = w.run_code("import os, time\n"
                      "r, wr = os.pipe()\n"
                      "pid = os.fork()\n"
                      "if pid == 0:\n"
                      "    g = os.fork()\n"
                      "    if g == 0:\n"
                      "        time.sleep(60)\n"
                      "        os._exit(0)\n"
                      "    os.write(wr, str(g).encode())\n"
                      "    os._exit(0)\n"
                      "os.waitpid(pid, 0)\n"
                      "print(os.read(r, 32).decode())\n");
  require_complete(r);
  BOOST_REQUIRE(!r.out.empty());
  const pid_t grandchild = static_cast<pid_t>(std::stol(r.out));
  BOOST_TEST(parent_of(grandchild) == w.pid());
  // It lives until the test ends it, so the parent check above never races
  // its exit.
  BOOST_REQUIRE(::kill(grandchild, SIGKILL) == 0);
  BOOST_TEST(gone_within(grandchild, 30s), "pid " << grandchild << " still there after 30 s");
}

BOOST_AUTO_TEST_CASE(oneshot_mode) {
  worker_process w({"--mode", "oneshot"});
  BOOST_TEST(w.ready()["mode"] == "oneshot");
  auto r = w.run_code("print(1)");
  require_complete(r);
  BOOST_TEST(r.out == "1\n");
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 0);
}

BOOST_AUTO_TEST_CASE(frame_of_a_worker_type_breaks_the_wire) {
  worker_process w;
  w.send(ipc::message_type::stdout_data, 1, "not for the worker");
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 3);
  BOOST_TEST(contains(w.diagnostics(),
                      "castellan-harness: broken wire: frame type 0x00 is not one the "
                      "supervisor sends"));
}

BOOST_AUTO_TEST_CASE(impossible_length_breaks_the_wire) {
  worker_process w;
  std::string raw(9, '\0');
  ipc::store_le32(raw.data(), 3); // len < 5
  raw[4] = 0x20;
  w.send_raw(raw);
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.code == 3);
  BOOST_TEST(contains(w.diagnostics(), "broken wire: frame len 3 is below the minimum of 5"));
}

BOOST_AUTO_TEST_CASE(malformed_command_breaks_the_wire) {
  worker_process w;
  w.send(ipc::message_type::command, 1, "/bin/echo"); // no terminating NUL
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.code == 3);
  BOOST_TEST(contains(w.diagnostics(), "COMMAND payload does not end with a NUL byte"));
}

BOOST_AUTO_TEST_CASE(unexpected_check_answer_breaks_the_wire) {
  worker_process w;
  w.send(ipc::message_type::allow, 1, "");
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.code == 3);
  BOOST_TEST(contains(w.diagnostics(), "unexpected frame type 0x10"));
}

BOOST_AUTO_TEST_CASE(user_code_exiting_the_process) {
  worker_process w;
  w.send(ipc::message_type::code, 1, "import os\nos._exit(42)");
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 42);
}

BOOST_AUTO_TEST_SUITE_END()
