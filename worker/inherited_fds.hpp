#pragma once

/// @file inherited_fds.hpp
/// Checks that the fds the supervisor passed are what the harness expects,
/// so that a wrong command line fails here with a clear message instead of
/// as a broken wire inside Python.

#include "ipc/outcome.hpp"
#include "worker/options.hpp"

namespace castellan::worker {

/// The segment fd is a valid segment (ipc::segment::attach validates magic,
/// version, capacity and size on a duplicate), and both doorbells are
/// non-blocking eventfds.
outcome<void> check_inherited_fds(const options& opts);

/// The status fd (when given) is open and a pipe's write end; it is made
/// close-on-exec, so that the harness never inherits it.
outcome<void> check_status_fd(const options& opts);

/// The interpreter is executable and the harness readable.
outcome<void> check_paths(const options& opts);

} // namespace castellan::worker
