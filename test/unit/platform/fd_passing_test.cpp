// SCM_RIGHTS over an AF_UNIX socket pair: what the egress relay relies on.

#include <boost/test/unit_test.hpp>

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "platform/linux/fd_passing.hpp"

using namespace castellan;

namespace {

struct seqpacket_pair {
  unique_fd a, b;
  seqpacket_pair() {
    int p[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) == 0);
    a.reset(p[0]);
    b.reset(p[1]);
  }
};

int open_fds() {
  int n = 0;
  DIR* d = ::opendir("/proc/self/fd");
  BOOST_REQUIRE(d != nullptr);
  while (::readdir(d) != nullptr)
    ++n;
  ::closedir(d);
  return n;
}

} // namespace

BOOST_AUTO_TEST_SUITE(fd_passing_tests)

BOOST_AUTO_TEST_CASE(a_passed_fd_works_and_is_close_on_exec) {
  seqpacket_pair s;
  int p[2];
  BOOST_REQUIRE(::pipe(p) == 0);
  unique_fd r{p[0]}, w{p[1]};
  BOOST_REQUIRE(platform::send_fd(s.a.get(), w.get()));
  w.reset();
  auto got = platform::receive_fd(s.b.get());
  BOOST_REQUIRE(got);
  BOOST_REQUIRE(got->fd);
  BOOST_TEST((::fcntl(got->fd.get(), F_GETFD) & FD_CLOEXEC) != 0);
  BOOST_TEST(::write(got->fd.get(), "x", 1) == 1);
  char c = 0;
  BOOST_TEST(::read(r.get(), &c, 1) == 1);
  BOOST_TEST(c == 'x');
}

BOOST_AUTO_TEST_CASE(extra_fds_from_a_hostile_sender_are_closed) {
  seqpacket_pair s;
  int fds[3];
  for (int& fd : fds)
    fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  BOOST_REQUIRE(::sendmsg(s.a.get(), &msg, 0) == 1);
  for (int fd : fds)
    ::close(fd);
  const int before = open_fds();
  auto got = platform::receive_fd(s.b.get());
  BOOST_REQUIRE(got);
  BOOST_TEST(got->fd.valid());
  BOOST_TEST(open_fds() == before + 1); // one kept, two closed
}

BOOST_AUTO_TEST_CASE(nothing_pending_is_eagain_and_a_closed_peer_says_so) {
  seqpacket_pair s;
  auto none = platform::receive_fd(s.b.get(), MSG_DONTWAIT);
  BOOST_REQUIRE(!none);
  BOOST_TEST(none.error().code == EAGAIN);
  s.a.reset();
  auto closed = platform::receive_fd(s.b.get(), MSG_DONTWAIT);
  BOOST_REQUIRE(closed);
  BOOST_TEST(closed->closed);
  BOOST_TEST(!closed->fd.valid());
}

BOOST_AUTO_TEST_SUITE_END()
