// SCM_RIGHTS over an AF_UNIX socket pair: what the egress relay, the
// listener handover and the launcher's requests rely on.

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

BOOST_AUTO_TEST_CASE(a_message_carries_its_payload_and_fds_in_order) {
  seqpacket_pair s;
  int p1[2], p2[2];
  BOOST_REQUIRE(::pipe2(p1, O_CLOEXEC) == 0);
  BOOST_REQUIRE(::pipe2(p2, O_CLOEXEC) == 0);
  unique_fd r1(p1[0]), w1(p1[1]), r2(p2[0]), w2(p2[1]);
  const int fds[] = {w1.get(), w2.get()};
  BOOST_REQUIRE(platform::send_message(s.a.get(), "{\"x\":1}", fds, 2));
  auto got = platform::receive_message(s.b.get(), 64, 2);
  BOOST_REQUIRE_MESSAGE(got, (got ? "" : got.error().describe()));
  BOOST_TEST(got->payload == "{\"x\":1}");
  BOOST_REQUIRE(got->fds.size() == 2u);
  // The first received fd is the first pipe's write end, the second the second's.
  BOOST_TEST(::write(got->fds[0].get(), "a", 1) == 1);
  BOOST_TEST(::write(got->fds[1].get(), "b", 1) == 1);
  char c = 0;
  BOOST_TEST(::read(r1.get(), &c, 1) == 1);
  BOOST_TEST(c == 'a');
  BOOST_TEST(::read(r2.get(), &c, 1) == 1);
  BOOST_TEST(c == 'b');
}

BOOST_AUTO_TEST_CASE(too_many_fds_or_a_long_payload_is_refused_and_nothing_leaks) {
  seqpacket_pair s;
  unique_fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int fds[] = {devnull.get(), devnull.get(), devnull.get()};
  BOOST_REQUIRE(platform::send_message(s.a.get(), "x", fds, 3));
  const int before = open_fds();
  auto many = platform::receive_message(s.b.get(), 64, 2);
  BOOST_REQUIRE(!many);
  BOOST_TEST(many.error().message.find("more fds than the 2 expected") != std::string::npos);
  BOOST_TEST(open_fds() == before);

  BOOST_REQUIRE(platform::send_message(s.a.get(), std::string(100, 'y'), fds, 1));
  auto longer = platform::receive_message(s.b.get(), 64, 1);
  BOOST_REQUIRE(!longer);
  BOOST_TEST(longer.error().message.find("longer than 64 bytes") != std::string::npos);
  BOOST_TEST(open_fds() == before);

  // An empty payload would read as EOF on the other side: never sent.
  BOOST_TEST(!platform::send_message(s.a.get(), "", fds, 1));
}

BOOST_AUTO_TEST_SUITE_END()
