#pragma once

/// @file fd_passing.hpp
/// Passing one file descriptor over an AF_UNIX socket (SCM_RIGHTS). The
/// egress relay uses it: castellan-worker, inside the sandbox's network
/// namespace, hands every accepted TCP connection to the egress proxy, which
/// serves that socket itself (no second copy of the bytes). The sandbox's
/// interpreter child uses it to hand its seccomp listener to the pool.

#include "ipc/result.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

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
outcome<received_fd> receive_fd(int sock, int flags = 0) noexcept;

} // namespace castellan::platform
