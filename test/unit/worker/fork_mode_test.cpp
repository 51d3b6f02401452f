/// @file fork_mode_test.cpp
/// The harness in fork mode (--mode fork), over a real wire: results and
/// exit codes through the child's report, output below sys.stdout, what the
/// children cannot reach, hostile reports, a zygote the code kills.

#include <boost/test/unit_test.hpp>

#include <signal.h>

#include <cstdlib>
#include <fstream>
#include <thread>

#include "platform/linux/landlock.hpp"
#include "worker_process.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::test;
using nlohmann::json;

namespace {

/// A worker whose harness runs each CODE in a child of its zygote.
struct fork_worker : worker_process {
  fork_worker() : worker_process({"--mode", "fork"}) {}
};

/// The one child of `pid` (its children file lists its main thread's), or
/// -1 when it has none or several.
pid_t only_child_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/task/" + std::to_string(pid) + "/children");
  pid_t child = -1, more = -1;
  if (!(in >> child) || (in >> more))
    return -1;
  return child;
}



} // namespace

BOOST_AUTO_TEST_SUITE(worker_fork_mode)

BOOST_AUTO_TEST_CASE(results_come_from_the_childs_report) {
  fork_worker w;
  BOOST_TEST(w.ready()["mode"] == "fork");
  auto r = w.run_code("print(6*7)");
  require_complete(r);
  BOOST_TEST(r.out == "42\n");
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 0, "exception": null})"));

  r = w.run_code("raise ValueError('x')");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "ValueError");
  BOOST_TEST(r.result["exception"]["message"] == "x");
  BOOST_TEST(r.result["exception"]["traceback"] == "Traceback (most recent call last):\n"
                                                   "  File \"<exec>\", line 1, in <module>\n"
                                                   "    raise ValueError('x')\n"
                                                   "ValueError: x\n");

  r = w.run_code("import sys\nsys.exit(3)");
  require_complete(r);
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 3, "exception": null})"));

  r = w.run_code("import sys\nsys.exit('bye')");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.err == "bye\n");

  // No report at all: the wait status is the exec's end.
  r = w.run_code("import os\nprint('before', flush=True)\nos._exit(7)");
  require_complete(r);
  BOOST_TEST(r.out == "before\n");
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 7, "exception": null})"));

  r = w.run_code("import os, signal\nos.kill(os.getpid(), signal.SIGKILL)");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 128 + SIGKILL);
  BOOST_TEST(contains(r.err, "killed by signal 9"), r.err);
}

BOOST_AUTO_TEST_CASE(output_below_sys_stdout_is_captured) {
  fork_worker w;
  auto r = w.run_code("import os, sys, ctypes, subprocess\n"
                      "print('py', flush=True)\n"
                      "os.write(1, b'fd1\\n')\n"
                      "os.write(2, b'fd2\\n')\n"
                      "ctypes.CDLL(None).printf(b'libc\\n')\n"
                      "subprocess.run(['/bin/echo', 'sub'])\n"
                      "sys.stderr.write('err')\n");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 0, r.result.dump() << r.err);
  for (const char* part : {"py\n", "fd1\n", "libc\n", "sub\n"})
    BOOST_TEST(contains(r.out, part), part << " missing from " << r.out);
  BOOST_TEST(r.out.size() == std::string("py\nfd1\nlibc\nsub\n").size(), r.out);
  BOOST_TEST(contains(r.err, "fd2\n"));
  BOOST_TEST(contains(r.err, "err"));
}

BOOST_AUTO_TEST_CASE(a_big_exception_is_cut_to_fit_the_report) {
  fork_worker w;
  auto r = w.run_code("raise ValueError('m' * 200000)");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "ValueError");
  const std::string message = r.result["exception"]["message"];
  BOOST_TEST(message.size() < 65536u);
  BOOST_TEST(contains(message, "\xe2\x80\xa6[truncated]"));
  BOOST_TEST(w.run_code("print('next')").out == "next\n");
}

BOOST_AUTO_TEST_CASE(a_process_the_code_forked_does_not_hold_the_result_back) {
  fork_worker w;
  // The grandchild keeps fd 1/2 and every other inherited fd open for a
  // minute; the exec ends when its own process ends. It is still running
  // when the exec's process is gone, so nothing can be put back for the
  // next exec: the worker retires (the RESULT says why; the pool replaces
  // it), and refuses the next exec without running it.
  auto r = w.run_code("import os, time\n"
                      "pid = os.fork()\n"
                      "if pid == 0:\n"
                      "    time.sleep(60)\n"
                      "    os._exit(0)\n"
                      "print(pid)\n",
                      20s);
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 0);
  BOOST_TEST(r.result["retire"] == "a process the exec started is still running", r.result.dump());
  const pid_t grandchild = static_cast<pid_t>(std::atoi(r.out.c_str()));
  BOOST_REQUIRE(grandchild > 0);
  BOOST_TEST(process_exists(grandchild));
  auto next = w.run_code("print('served')");
  require_complete(next);
  BOOST_TEST(next.out.empty(), next.out);
  BOOST_TEST(next.result["exit_code"] == 126);
  BOOST_TEST(contains(next.result.value("refused", ""), "this worker retired"), next.result.dump());
  ::kill(grandchild, SIGKILL);
}

BOOST_AUTO_TEST_CASE(output_written_after_an_exec_ended_goes_to_no_exec) {
  fork_worker w;
  // The grandchild outlives the exec and writes only when the test tells it
  // to (SIGUSR1, blocked before the fork so that none is lost), once the
  // exec's result is in.
  auto r = w.run_code("import os, signal\n"
                      "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})\n"
                      "pid = os.fork()\n"
                      "if pid == 0:\n"
                      "    signal.sigwait({signal.SIGUSR1})\n"
                      "    os.write(1, b'late\\n')\n"
                      "    os._exit(0)\n"
                      "print(pid)\n");
  require_complete(r);
  const pid_t grandchild = static_cast<pid_t>(std::atoi(r.out.c_str()));
  BOOST_REQUIRE(grandchild > 0);
  // Told, it writes and ends (a zombie of the zygote, which no longer
  // reaps: the worker retired when the exec's process ended before it).
  BOOST_REQUIRE(::kill(grandchild, SIGUSR1) == 0);
  BOOST_REQUIRE_MESSAGE(wait_until_exited(grandchild, 30s),
                        "grandchild " << grandchild << " did not write and exit within 30 s");
  r = w.run_code("print('b')");
  require_complete(r);
  BOOST_TEST(r.out.empty(), r.out);
  BOOST_TEST(contains(r.result.value("refused", ""), "this worker retired"), r.result.dump());
}

BOOST_AUTO_TEST_CASE(nothing_the_code_changes_reaches_the_next_exec) {
  fork_worker w;
  auto r = w.run_code("import os, sys, io\n"
                      "os.chdir('/')\n"
                      "os.environ['CASTELLAN_LEAK'] = '1'\n"
                      "sys.argv.append('leak')\n"
                      "sys.path.append('/leak')\n"
                      "leak = 1\n"
                      "sys.stdout = io.StringIO()\n"
                      "import colorsys\n");
  require_complete(r);
  r = w.run_code("import os, sys\n"
                 "print(os.getcwd() == '/', 'CASTELLAN_LEAK' in os.environ, sys.argv,\n"
                 "      '/leak' in sys.path, 'leak' in globals(), 'colorsys' in sys.modules)\n");
  require_complete(r);
  BOOST_TEST(r.out == "False False ['<exec>'] False False False\n", r.out << r.err);
}

BOOST_AUTO_TEST_CASE(the_children_hold_nothing_of_the_wire) {
  fork_worker w;
  // No segment mapping, no segment fd, no doorbell: only the harness can
  // write frames.
  auto r = w.run_code(
      "import os\n"
      "maps = open('/proc/self/maps').read()\n"
      "links = [os.readlink('/proc/self/fd/' + fd) for fd in os.listdir('/proc/self/fd')\n"
      "         if os.path.exists('/proc/self/fd/' + fd)]\n"
      "print('castellan-segment' in maps,\n"
      "      any('castellan-segment' in l or 'eventfd' in l for l in links))\n");
  require_complete(r);
  BOOST_TEST(r.out == "False False\n", r.out << r.err);
}

BOOST_AUTO_TEST_CASE(a_forged_report_is_not_believed) {
  fork_worker w;
  // Junk, then a header that claims more than was sent, on every pipe the
  // child holds besides fd 1/2 (its report pipe among them): the harness
  // falls back to the wait status and keeps serving.
  auto r =
      w.run_code("import os, struct\n"
                 "for fd in os.listdir('/proc/self/fd'):\n"
                 "    fd = int(fd)\n"
                 "    try:\n"
                 "        link = os.readlink(f'/proc/self/fd/{fd}')\n"
                 "    except OSError:\n"
                 "        continue\n"
                 "    if fd > 2 and link.startswith('pipe:'):\n"
                 "        try:\n"
                 "            os.write(fd, struct.pack('<iiiii', 0, 1 << 30, 5, 5, -1) + b'x')\n"
                 "        except OSError:\n"
                 "            pass\n"
                 "os._exit(9)\n");
  require_complete(r);
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 9, "exception": null})"));
  BOOST_TEST(w.run_code("print('still')").out == "still\n");
}

BOOST_AUTO_TEST_CASE(the_code_cannot_signal_the_zygote_or_the_harness) {
  fork_worker w;
  if (platform::landlock_abi() < 6) {
    castellan::test::skip("Landlock ABI " + std::to_string(platform::landlock_abi()) +
                          " has no signal scoping (6)");
    return;
  }
  // The exec's process is in a Landlock domain of its own (nested in the
  // worker's), scoped for signals: its parent and the harness are outside.
  auto r = w.run_code("import os, signal\n"
                      "for pid in (os.getppid(), " + std::to_string(w.harness_pid()) + "):\n"
                      "    try:\n"
                      "        os.kill(pid, signal.SIGKILL)\n"
                      "        print('killed')\n"
                      "    except PermissionError:\n"
                      "        print('EPERM')\n");
  require_complete(r);
  BOOST_TEST(r.out == "EPERM\nEPERM\n", r.out << r.err);
  BOOST_TEST(w.run_code("print('still')").out == "still\n");
}

BOOST_AUTO_TEST_CASE(killing_the_zygote_ends_the_worker_not_the_wire) {
  fork_worker w;
  BOOST_TEST(w.run_code("print(1)").out == "1\n");
  // The zygote is the harness's only child. Without it the harness cannot
  // run another exec: it exits (4) instead of answering, and the pool
  // replaces the worker.
  const pid_t zygote = only_child_of(w.harness_pid());
  BOOST_REQUIRE(zygote > 0);
  BOOST_REQUIRE(::kill(zygote, SIGKILL) == 0);
  auto r = w.run_code("print(2)", 20s);
  BOOST_TEST(!r.complete);
  auto e = w.wait_exit(10s);
  BOOST_TEST(e.exited);
  BOOST_TEST(e.code == 4);
  BOOST_TEST(contains(w.diagnostics(), "the zygote is gone"), w.diagnostics());
}

BOOST_AUTO_TEST_CASE(the_exec_is_dumpable_again_in_its_own_domain) {
  // The zygote is not dumpable (sandbox_tests checks it from the host); the
  // exec's process, once in its own Landlock domain, is again, so that its
  // own /proc/self works in full.
  fork_worker w;
  auto r = w.run_code("import ctypes, os\n"
                      "print(ctypes.CDLL(None).prctl(3, 0, 0, 0, 0),\n"  // PR_GET_DUMPABLE
                      "      len(open('/proc/self/environ', 'rb').read()) >= 0,\n"
                      "      len(os.listdir('/proc/self/fd')) > 0)\n");
  require_complete(r);
  BOOST_TEST(r.out == "1 True True\n", r.out << r.err);
}

BOOST_AUTO_TEST_CASE(a_command_runs_in_a_child_of_the_zygote) {
  fork_worker w;
  auto argv = [](std::initializer_list<std::string> args) {
    std::string out;
    for (const auto& a : args)
      out += a + '\0';
    return out;
  };
  // Not in the harness: in a child of the zygote (its parent), with only
  // stdio open.
  auto r = w.run(ipc::message_type::command, 7,
                 argv({"/bin/sh", "-c", "echo $PPID; /bin/ls /proc/self/fd; echo err >&2"}));
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 0, r.result.dump());
  const pid_t zygote = only_child_of(w.harness_pid());
  BOOST_TEST(r.out == std::to_string(zygote) + "\n0\n1\n2\n3\n", r.out);
  BOOST_TEST(r.err == "err\n");
  r = w.run(ipc::message_type::command, 8, argv({"no-such-program"}));
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 127);
  BOOST_TEST(r.err == "castellan: no-such-program: No such file or directory\n", r.err);
  r = w.run(ipc::message_type::command, 9, argv({"/bin/sh", "-c", "kill -9 $$"}));
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 128 + SIGKILL);
  BOOST_TEST(r.err.empty(), r.err);
}

BOOST_AUTO_TEST_SUITE_END()
