#pragma once

/// @file fd_passing.hpp
/// Passing file descriptors over an AF_UNIX socket (SCM_RIGHTS). The
/// egress relay uses it: castellan-worker, inside the sandbox's network
/// namespace, hands every accepted TCP connection to the egress proxy, which
/// serves that socket itself (no second copy of the bytes). The sandbox's
/// interpreter child uses it to hand its seccomp listener to the pool. The
/// pool's launcher receives a worker's fds with its start request and sends
/// back its pidfd.

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// The most fds one message carries.
constexpr std::size_t max_fds_per_message = 16;

/// Sends `payload` (not empty: an empty datagram reads as EOF on a
/// SEQPACKET socket) with `fds` attached, in one sendmsg (MSG_NOSIGNAL plus
/// `flags`).
outcome<void> send_message(int sock, std::string_view payload, const int* fds, std::size_t nfds,
                           int flags = 0) noexcept;

/// One message received by receive_message.
struct received_message {
  std::string payload;
  std::vector<unique_fd> fds; ///< close-on-exec, in the order sent
  bool closed = false;        ///< the peer has closed its end (nothing else is set)
};

/// Receives one message of at most `max_payload` bytes and at most
/// `max_fds` fds. A longer payload, or more fds, is a failure (and every fd
/// that arrived is closed: a hostile sender cannot make the receiver leak).
outcome<received_message> receive_message(int sock, std::size_t max_payload,
                                          std::size_t max_fds, int flags = 0);

/// Sends `fd` with a one-byte payload over the AF_UNIX socket `sock`
/// (MSG_NOSIGNAL, plus `flags`: with MSG_DONTWAIT a full socket is an EAGAIN
/// failure, never a stall).
outcome<void> send_fd(int sock, int fd, int flags = 0) noexcept;

/// What receive_fd found.
struct received_fd {
  unique_fd fd;     ///< invalid when the peer closed (`closed`) or sent no fd
  bool closed = false; ///< the peer has closed its end
};

/// Receives one message from `sock` (`flags` go to recvmsg: with
/// MSG_DONTWAIT, EAGAIN is a failure with that errno). Every fd beyond the
/// first one that arrives is closed, so a hostile sender cannot make the
/// receiver leak descriptors; the received fd is close-on-exec. A message
/// without a descriptor gives an invalid `fd` with `closed` false.
outcome<received_fd> receive_fd(int sock, int flags = 0);

} // namespace castellan::platform
