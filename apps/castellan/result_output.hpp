#pragma once

/// @file result_output.hpp
/// How the CLI shows what an exec did and how the pools are, the same
/// whether it ran the exec itself or a daemon did.

#include <cstddef>
#include <string>
#include <string_view>

#include "actors/exec_messages.hpp"

namespace castellan::cli {

/// The code's stdout on stdout and stderr on stderr, byte for byte, then
/// castellan's own notes (truncation, why it did not run) on stderr; or
/// (json) the whole result as one JSON object.
void print_result(const exec_result& r, bool json);

/// Writes `data` to fd 1 or 2 at once: a piece of streamed output.
void print_output(bool is_stderr, std::string_view data);

/// print_result (not json) for a result whose first `stdout_done` and
/// `stderr_done` bytes of output were already printed as they came.
void print_result_rest(const exec_result& r, std::size_t stdout_done, std::size_t stderr_done);

/// "pool default: 2 workers (2 idle, 0 busy, 0 starting), 0 queued of 64, …"
std::string pool_line(const pool_status& p);

} // namespace castellan::cli
