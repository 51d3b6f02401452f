#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <string>

#include "child_process.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"

using namespace castellan;
using namespace castellan::platform;
using castellan::test::run_capturing;

BOOST_AUTO_TEST_SUITE(spawn_worker_tests)

BOOST_AUTO_TEST_CASE(runs_the_program_with_exactly_the_given_environment) {
  worker_spec spec;
  spec.executable = "/usr/bin/env";
  spec.argv = {"env"};
  spec.env = {"A=1", "B=two"};
  auto [st, out] = run_capturing(spec);
  BOOST_TEST(st.code == 0);
  BOOST_TEST(!st.signaled);
  BOOST_TEST(out == "A=1\nB=two\n");
}

BOOST_AUTO_TEST_CASE(child_inherits_only_the_mapped_fds) {
  // A descriptor the supervisor holds without CLOEXEC must still not leak.
  unique_fd leaky(::open("/dev/null", O_RDONLY));
  BOOST_REQUIRE(leaky);
  worker_spec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", "ls /proc/self/fd"};
  spec.env = {"PATH=/usr/bin:/bin"};
  unique_fd devnull(::open("/dev/null", O_RDWR | O_CLOEXEC));
  spec.fds = {{devnull.get(), 0}, {devnull.get(), 2}, {devnull.get(), 7}};
  auto [st, out] = run_capturing(spec);
  BOOST_TEST(st.code == 0);
  // sh's fds: 0, 1 (the pipe), 2 and 7 (mapped), plus the one ls uses to read
  // the directory, which is 3.
  BOOST_TEST(out == "0\n1\n2\n3\n7\n");
}

BOOST_AUTO_TEST_CASE(exit_codes_and_signals_are_reported) {
  worker_spec spec;
  spec.executable = "/bin/sh";
  spec.argv = {"sh", "-c", "exit 7"};
  auto [st, out] = run_capturing(spec);
  BOOST_TEST(st.code == 7);
  BOOST_TEST(st.shell_code() == 7);
  spec.argv = {"sh", "-c", "kill -9 $$"};
  auto [st2, out2] = run_capturing(spec);
  BOOST_TEST(st2.signaled);
  BOOST_TEST(st2.signal == 9);
  BOOST_TEST(st2.shell_code() == 137);
  BOOST_TEST(st2.describe() == "killed by SIGKILL");
}

BOOST_AUTO_TEST_CASE(exec_failure_is_an_error_with_errno) {
  worker_spec spec;
  spec.executable = "/nonexistent/castellan-worker";
  spec.argv = {"x"};
  auto child = spawn_worker(spec);
  BOOST_REQUIRE(!child);
  BOOST_TEST(child.error().code == ENOENT);
  BOOST_TEST(child.error().message.find("/nonexistent/castellan-worker") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(bad_specs_are_refused_before_anything_starts) {
  worker_spec spec;
  spec.executable = "relative/path";
  spec.argv = {"x"};
  BOOST_TEST(!spawn_worker(spec));
  spec.executable = "/bin/true";
  spec.argv.clear();
  BOOST_TEST(!spawn_worker(spec));
  spec.argv = {"true"};
  spec.fds = {{0, 5}, {1, 5}};
  auto twice = spawn_worker(spec);
  BOOST_REQUIRE(!twice);
  BOOST_TEST(twice.error().message.find("mapped twice") != std::string::npos);
  spec.fds = {{9999, 3}};
  auto closed = spawn_worker(spec);
  BOOST_REQUIRE(!closed);
  BOOST_TEST(closed.error().code == EBADF);
}

BOOST_AUTO_TEST_CASE(isolation_it_cannot_apply_is_refused_not_skipped) {
  worker_spec spec;
  spec.executable = "/bin/true";
  spec.argv = {"true"};
  spec.namespaces.pid = true;
  auto child = spawn_worker(spec);
  BOOST_REQUIRE(!child);
  BOOST_TEST(child.error().message.find("refusing") != std::string::npos);
  spec.namespaces = {};
  spec.limits.memory_bytes = 1 << 20;
  BOOST_TEST(!spawn_worker(spec));
}

BOOST_AUTO_TEST_SUITE_END()
