#pragma once

/// @file egress_relay.hpp
/// The sandbox's end of the egress path. A worker's network namespace has
/// only loopback; when its policy allows any network, castellan-worker (PID
/// 1) listens on 127.0.0.1:<port> there and hands every connection it accepts
/// to the egress proxy in the supervisor, as the socket itself, over an
/// AF_UNIX socket that was created before the sandbox (SCM_RIGHTS). The proxy
/// then reads and writes that socket directly: PID 1 never touches a byte of
/// the traffic, so hostile code talking to it gets no parser to attack.

#include <cstdint>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::worker {

class egress_relay {
public:
  /// Checks that `unix_fd` is an AF_UNIX socket and binds a non-blocking
  /// listener to 127.0.0.1:`port` (loopback must be up). Takes `unix_fd`.
  static outcome<egress_relay> open(uint16_t port, int unix_fd);

  /// The listening socket, for poll().
  int listen_fd() const noexcept { return listener_.get(); }

  /// Accepts every pending connection and passes each to the proxy. A
  /// connection that cannot be passed (the proxy is gone or its socket is
  /// full) is closed at once: the client sees a reset, PID 1 never blocks.
  void accept_pending() noexcept;

  /// Connections passed / refused so far.
  uint64_t passed() const noexcept { return passed_; }
  uint64_t refused() const noexcept { return refused_; }

private:
  egress_relay(unique_fd listener, unique_fd proxy) noexcept
    : listener_(std::move(listener)), proxy_(std::move(proxy)) {}

  unique_fd listener_;
  unique_fd proxy_;
  uint64_t passed_ = 0;
  uint64_t refused_ = 0;
};

} // namespace castellan::worker
