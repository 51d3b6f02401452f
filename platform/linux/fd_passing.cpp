#include "platform/linux/fd_passing.hpp"

#include <sys/socket.h>

#include <cstring>

namespace castellan::platform {

outcome<void> send_fd(int sock, int fd) noexcept {
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
  std::memcpy(CMSG_DATA(c), &fd, sizeof fd);
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n != 1)
    return errno_failure("send_fd: sendmsg");
  return {};
}

outcome<unique_fd> receive_fd(int sock, int flags) noexcept {
  char byte = 0;
  iovec iov{&byte, 1};
  // Room for more than one descriptor, so that extra ones are seen (and
  // closed) rather than left to MSG_CTRUNC.
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * 8)] = {};
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
    return errno_failure("receive_fd: recvmsg");
  if (n == 0)
    return logic_failure("receive_fd: the peer closed the socket");
  unique_fd received;
  int count = 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    const std::size_t fds = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < fds; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (count++ == 0)
        received.reset(fd);
      else
        ::close(fd);
    }
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0)
    return logic_failure("receive_fd: control data truncated");
  if (count != 1)
    return logic_failure("receive_fd: expected one descriptor, got " + std::to_string(count));
  return received;
}

} // namespace castellan::platform
