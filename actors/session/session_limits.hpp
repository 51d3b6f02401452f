#pragma once

/// @file session_limits.hpp
/// How many sessions may exist and for how long: the supervisor's part of
/// sessions (supervisor_config::sessions). CAF-free data.

#include <cstdint>

namespace castellan {

struct session_limits {
  /// Sessions at once, all owners together; one more is answered `busy`.
  uint32_t max_sessions = 64;
  /// Sessions at once per owner (session_options::owner); one more is
  /// answered `busy`.
  uint32_t max_per_owner = 8;
  /// The idle TTL of a session that asks for none, and the most one may ask.
  uint64_t default_idle_ttl_ms = 10 * 60 * 1000;
  uint64_t max_idle_ttl_ms = 24 * 60 * 60 * 1000;
  /// The maximum lifetime of a session that asks for none, and the most one
  /// may ask.
  uint64_t default_max_lifetime_ms = 60 * 60 * 1000;
  uint64_t max_lifetime_ms = 24 * 60 * 60 * 1000;
  /// How long a create waits for the session's worker to be ready.
  uint64_t create_timeout_ms = 30 * 1000;
};

} // namespace castellan
