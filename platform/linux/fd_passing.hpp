#pragma once

/// @file fd_passing.hpp
/// One file descriptor across an AF_UNIX socket (SCM_RIGHTS). The sandbox's
/// interpreter child uses it to hand its seccomp listener to the supervisor.

#include "ipc/result.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// Sends `fd` with a one-byte payload over the connected socket `sock`.
outcome<void> send_fd(int sock, int fd) noexcept;

/// Receives one descriptor sent by send_fd (close-on-exec). A message with
/// no descriptor, several, or a truncated control block is an error, and
/// every descriptor that did arrive is closed: the sender may be hostile.
/// `flags` is passed to recvmsg (MSG_DONTWAIT for a poll-driven caller).
outcome<unique_fd> receive_fd(int sock, int flags = 0) noexcept;

} // namespace castellan::platform
