#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <signal.h>

#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"

using namespace castellan;
using namespace castellan::platform;

BOOST_AUTO_TEST_SUITE(pidfd_tests)

BOOST_AUTO_TEST_CASE(try_reap_sees_running_then_exited) {
  worker_spec spec;
  spec.executable = "/bin/sleep";
  spec.argv = {"sleep", "30"};
  auto child = spawn_worker(spec);
  BOOST_REQUIRE(child);
  auto running = pidfd_try_reap(child->pidfd.get());
  BOOST_REQUIRE(running);
  BOOST_TEST(!running->has_value());
  BOOST_REQUIRE(pidfd_signal(child->pidfd.get(), SIGKILL));
  // The pidfd becomes readable when the process exits: what the pool's
  // io_uring poll waits for.
  pollfd pfd{child->pidfd.get(), POLLIN, 0};
  BOOST_REQUIRE_EQUAL(::poll(&pfd, 1, 10'000), 1);
  auto done = pidfd_try_reap(child->pidfd.get());
  BOOST_REQUIRE(done);
  BOOST_REQUIRE(done->has_value());
  BOOST_TEST((*done)->signaled);
  BOOST_TEST((*done)->signal == SIGKILL);
  // Signalling a reaped process is not an error (ESRCH is success).
  BOOST_TEST(static_cast<bool>(pidfd_signal(child->pidfd.get(), SIGKILL)));
}

BOOST_AUTO_TEST_SUITE_END()
