#pragma once

/// @file fd_limit.hpp
/// Room in RLIMIT_NOFILE for the daemon's connections.

#include <cstdint>
#include <string>

namespace castellan::cli {

/// Fds the daemon needs besides its connections: its workers' (a handful
/// each: segment, doorbells, pidfd, pipes, cgroup files), the listeners,
/// the audit file, the proxy's and the policy watcher's.
constexpr uint64_t fd_reserve = 1024;

/// Raises the soft RLIMIT_NOFILE to `max_connections + fd_reserve`, as far
/// as the hard limit allows (never lowers it): systemd and most logins
/// start a process at a soft limit of 1024, which would leave a daemon
/// with a thousand connections short of fds and its accept() failing.
/// Returns a warning when the hard limit is too low for that, else "".
std::string raise_fd_limit(uint64_t max_connections);

} // namespace castellan::cli
