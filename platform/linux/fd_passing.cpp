/// @file fd_passing.cpp
/// SCM_RIGHTS send and receive (see fd_passing.hpp).

#include "platform/linux/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace castellan::platform {

namespace {

/// Room for a few fds: a sender that attaches more than one gets them
/// closed instead of truncating the control message silently.
constexpr int max_fds_per_message = 8;

} // namespace

outcome<void> send_fd(int sock, int fd, int flags) noexcept {
  char byte = 'F';
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno_failure("sendmsg(SCM_RIGHTS)");
  return {};
}

outcome<received_fd> receive_fd(int sock, int flags) noexcept {
  char byte = 0;
  iovec iov{&byte, 1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds_per_message)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ssize_t n;
  do {
    n = ::recvmsg(sock, &msg, flags | MSG_CMSG_CLOEXEC);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno_failure("recvmsg(SCM_RIGHTS)");
  received_fd out;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      if (!out.fd)
        out.fd.reset(fd);
      else
        ::close(fd);
    }
  }
  if (n == 0 && !out.fd)
    out.closed = true;
  if ((msg.msg_flags & MSG_CTRUNC) != 0 && out.fd)
    return logic_failure("recvmsg(SCM_RIGHTS): control data truncated (more fds than expected)");
  return out;
}

} // namespace castellan::platform
