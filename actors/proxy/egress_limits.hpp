#pragma once

/// @file egress_limits.hpp
/// The egress proxy's limits. Every one has a number, a clear refusal and a
/// test that reaches it (test/unit/actors/proxy).

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace castellan::proxy {

struct egress_limits {
  /// Open connections one worker may have through the proxy; beyond it a
  /// new connection is answered 429 and closed.
  uint32_t connections_per_worker = 64;
  /// Open connections of all workers together (503 beyond). A tunnel holds
  /// six fds (two sockets, two pipes): keep this well below RLIMIT_NOFILE / 6.
  uint32_t connections_total = 1024;
  /// Bytes (both directions) one exec may move through the proxy; the
  /// connection that crosses it is closed, and so is every later one in the
  /// same exec. 0: unlimited.
  uint64_t bytes_per_exec = 1ull << 30;
  /// A request head (request line and headers) must arrive completely within
  /// this time after its first byte was awaited: 408 otherwise. This is what
  /// ends a slowloris client.
  std::chrono::milliseconds head_timeout{10000};
  /// Largest request or response head accepted (431 / 502 beyond).
  std::size_t max_head_bytes = 32 * 1024;
  /// Name resolution plus connect to the chosen address (504 beyond).
  std::chrono::milliseconds connect_timeout{10000};
  /// A tunnel or a forwarded exchange with no byte in either direction for
  /// this long is closed.
  std::chrono::milliseconds idle_timeout{60000};
  /// Buffer per direction of a connection.
  std::size_t buffer_bytes = 64 * 1024;
};

} // namespace castellan::proxy
