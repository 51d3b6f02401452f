#pragma once

/// @file exec_setup.hpp
/// A request's environment, working directory and stdin: checked once where
/// the pool admits the request, and sent to the worker as the SETUP frame
/// (docs/wire.md) right before its CODE or COMMAND.

#include <cstddef>
#include <cstdint>
#include <string>

#include "actors/exec_messages.hpp"

namespace castellan {

/// Variables one request may set.
inline constexpr std::size_t max_env_entries = 4096;
/// The longest working directory a request may name (PATH_MAX less its NUL).
inline constexpr std::size_t max_cwd_bytes = 4095;

/// SETUP flags: the exec's output is streamed (exec_request::output_sink):
/// line-buffered in the code, handed over by the worker piece by piece.
inline constexpr uint32_t setup_stream_output = 1u << 0;

/// The SETUP frame's fixed part: the three lengths and the flags.
inline constexpr std::size_t setup_header_bytes = 16;

/// True when `req` sets anything that needs a SETUP frame.
bool has_setup(const exec_request& req) noexcept;

/// Why `req`'s env, cwd or stdin cannot be sent to a worker, naming the
/// field ("env[2]: …", "cwd: …"); empty when they can.
std::string check_setup(const exec_request& req);

/// The SETUP payload: u32 LE lengths of the working directory, of the
/// environment block and of stdin, u32 LE flags (setup_stream_output), then
/// those bytes in that order; the environment block is the "NAME=VALUE"
/// entries, each NUL-terminated.
/// `req` must have passed check_setup.
std::string encode_setup(const exec_request& req);

} // namespace castellan
