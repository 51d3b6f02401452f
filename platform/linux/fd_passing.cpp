/// @file fd_passing.cpp
/// SCM_RIGHTS send and receive (see fd_passing.hpp).

#include "platform/linux/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace castellan::platform {

outcome<void> send_message(int sock, std::string_view payload, const int* fds, std::size_t nfds,
                           int flags) noexcept {
  if (payload.empty() || nfds > max_fds_per_message)
    return logic_failure("sendmsg(SCM_RIGHTS): empty payload or more than " +
                         std::to_string(max_fds_per_message) + " fds");
  iovec iov{const_cast<char*>(payload.data()), payload.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * max_fds_per_message)] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  if (nfds > 0) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
    std::memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
  }
  ssize_t n;
  do {
    n = ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno_failure("sendmsg(SCM_RIGHTS)");
  if (static_cast<std::size_t>(n) != payload.size())
    return logic_failure("sendmsg(SCM_RIGHTS): short write of " + std::to_string(n) + " of " +
                         std::to_string(payload.size()) + " bytes");
  return {};
}

outcome<received_message> receive_message(int sock, std::size_t max_payload,
                                          std::size_t max_fds, int flags) {
  received_message out;
  // One byte more than allowed: a message that fills it is too long.
  out.payload.resize(max_payload + 1);
  iovec iov{out.payload.data(), out.payload.size()};
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
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
      continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
      out.fds.emplace_back(fd);
    }
  }
  if (n == 0 && out.fds.empty()) {
    out.payload.clear();
    out.closed = true;
    return out;
  }
  if ((msg.msg_flags & MSG_CTRUNC) != 0 || out.fds.size() > max_fds)
    return logic_failure("recvmsg(SCM_RIGHTS): more fds than the " + std::to_string(max_fds) +
                         " expected");
  if ((msg.msg_flags & MSG_TRUNC) != 0 || static_cast<std::size_t>(n) > max_payload)
    return logic_failure("recvmsg(SCM_RIGHTS): a message longer than " +
                         std::to_string(max_payload) + " bytes");
  out.payload.resize(static_cast<std::size_t>(n));
  return out;
}

outcome<void> send_fd(int sock, int fd, int flags) noexcept {
  return send_message(sock, "F", &fd, 1, flags);
}

outcome<received_fd> receive_fd(int sock, int flags) {
  // Extra fds are accepted and closed here (the first one is the answer).
  auto m = receive_message(sock, 1, max_fds_per_message, flags);
  if (!m)
    return m.error();
  received_fd out;
  out.closed = m->closed;
  if (!m->fds.empty())
    out.fd = std::move(m->fds.front());
  return out;
}

} // namespace castellan::platform
