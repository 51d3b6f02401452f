/// @file doorbell_test.cpp
/// eventfd doorbells: counting, draining, and a saturated counter that makes
/// ring() fail instead of blocking.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <future>

#include "ipc/doorbell.hpp"

using namespace castellan;
using namespace castellan::ipc;

namespace {

doorbell make_doorbell() {
  auto d = doorbell::create();
  BOOST_REQUIRE(d.has_value());
  return std::move(*d);
}

bool readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 1 && (p.revents & POLLIN) != 0;
}

} // namespace

BOOST_AUTO_TEST_SUITE(doorbells)

BOOST_AUTO_TEST_CASE(flags) {
  auto d = make_doorbell();
  BOOST_TEST((::fcntl(d.fd(), F_GETFL) & O_NONBLOCK) == O_NONBLOCK);
  BOOST_TEST((::fcntl(d.fd(), F_GETFD) & FD_CLOEXEC) == FD_CLOEXEC);
}

BOOST_AUTO_TEST_CASE(ring_and_drain) {
  auto d = make_doorbell();
  BOOST_TEST(d.drain() == 0u);
  BOOST_TEST(!readable(d.fd()));
  BOOST_TEST(d.ring().has_value());
  BOOST_TEST(readable(d.fd()));
  BOOST_TEST(d.ring().has_value());
  BOOST_TEST(d.ring().has_value());
  BOOST_TEST(d.drain() == 3u);
  BOOST_TEST(!readable(d.fd()));
  BOOST_TEST(d.drain() == 0u);
}

BOOST_AUTO_TEST_CASE(adopted_fd_sees_the_same_counter) {
  auto d = make_doorbell();
  castellan::ipc::doorbell other{unique_fd{::fcntl(d.fd(), F_DUPFD_CLOEXEC, 0)}};
  BOOST_TEST(other.ring().has_value());
  BOOST_TEST(d.drain() == 1u);
}

BOOST_AUTO_TEST_CASE(saturated_counter_fails_without_blocking) {
  auto d = make_doorbell();
  // The largest value an eventfd counter holds; a hostile worker can put it
  // there with one write.
  const uint64_t max = 0xfffffffffffffffeull;
  BOOST_REQUIRE(::write(d.fd(), &max, sizeof max) == 8);
  // ring() runs on another thread: were it to block on the full counter,
  // the test would see the future not ready, drain the counter to free it,
  // and fail (the 30 s are a safety net, not a timing assertion).
  auto ringing = std::async(std::launch::async, [&d] { return d.ring(); });
  if (ringing.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    uint64_t v = 0;
    if (::read(d.fd(), &v, sizeof v) != sizeof v)
      BOOST_ERROR("draining the counter failed too");
    BOOST_FAIL("ring() blocked on a saturated counter");
  }
  auto r = ringing.get();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code == EAGAIN);
  BOOST_TEST(r.error().message == "doorbell " + std::to_string(d.fd()) +
                                      " is saturated (the other side never drains it)");
  BOOST_TEST(d.drain() == max);
  BOOST_TEST(d.ring().has_value());
  BOOST_TEST(d.drain() == 1u);
}

BOOST_AUTO_TEST_CASE(closed_fd_fails) {
  castellan::ipc::doorbell d{unique_fd{}};
  auto r = d.ring();
  BOOST_REQUIRE(!r.has_value());
  BOOST_TEST(r.error().code == EBADF);
  BOOST_TEST(d.drain() == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
