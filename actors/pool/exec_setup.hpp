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

/// SETUP flags: the request has files (files_in, files_out); the header has
/// one more length, of the files block that follows stdin.
inline constexpr uint32_t setup_files = 1u << 1;

/// The SETUP frame's fixed part: the three lengths and the flags (and the
/// files block's length with setup_files).
inline constexpr std::size_t setup_header_bytes = 16;

/// The most files a request may write (files_in), and the most it may ask
/// back (files_out).
inline constexpr std::size_t max_files = 64;
/// The largest file a request may write, or read back.
inline constexpr uint64_t max_file_bytes = 8u << 20;
/// The most bytes a request's files_in take together, and the most its
/// files_out bring back together.
inline constexpr uint64_t max_files_total_bytes = 32u << 20;
/// The longest file path (PATH_MAX less its NUL), as given and resolved.
inline constexpr std::size_t max_file_path_bytes = 4095;
/// Where files go when a request names no working directory: the exec then
/// runs there.
inline constexpr const char* default_files_dir = "/tmp";

/// True when `req` sets anything that needs a SETUP frame.
bool has_setup(const exec_request& req) noexcept;

/// Why `req`'s env, cwd, stdin or files cannot be sent to a worker, naming
/// the field ("env[2]: …", "cwd: …", "files_in[1].path: …"); empty when
/// they can.
std::string check_setup(const exec_request& req);

/// The absolute path, without `.` or empty components, where a request's
/// file `path` lives: a relative path is taken from the request's `cwd`
/// (`default_files_dir` when it is empty). It must lie below /tmp, or below
/// the working directory unless the request is `narrowed` (a tightened
/// request's files stay in /tmp, which its exec cannot leave files in for
/// another: the harness reads them with the worker's rights, not the
/// exec's). Empty, with `why` set, when the path is refused: empty, NUL,
/// too long, a `..` component, or outside those places.
std::string resolve_file_path(const std::string& path, const std::string& cwd, bool narrowed,
                              std::string& why);

/// The SETUP payload: u32 LE lengths of the working directory, of the
/// environment block and of stdin, u32 LE flags (setup_stream_output,
/// setup_files), with setup_files the u32 LE length of the files block,
/// then those bytes in that order; the environment block is the
/// "NAME=VALUE" entries, each NUL-terminated; the files block is u32 LE
/// counts of files_in and files_out, then per files_in u32 LE path length,
/// mode and content length, the path (resolved) and the content, then per
/// files_out u32 LE path length and the path (resolved). A request with
/// files and no cwd gets `default_files_dir` as its cwd.
/// `req` must have passed check_setup.
std::string encode_setup(const exec_request& req);

/// The bytes `req`'s SETUP frame takes (0 without one), without encoding it.
uint64_t setup_bytes(const exec_request& req) noexcept;

} // namespace castellan
