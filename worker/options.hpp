#pragma once

/// @file options.hpp
/// The command line of castellan-worker, as the pool writes it.

#include <string>

#include "ipc/outcome.hpp"

namespace castellan::worker {

/// How many requests one harness serves.
enum class harness_mode : unsigned char {
  reuse,   ///< serve requests until SHUTDOWN (fresh globals for each)
  oneshot, ///< serve one request, then exit 0
  fork,    ///< serve requests until SHUTDOWN, each in a child forked from the warm harness
  session, ///< serve requests until SHUTDOWN in one __main__, env and cwd kept between them
};

/// The parsed command line. Every field is set after a successful parse.
struct options {
  int segment_fd = -1;
  int to_worker_fd = -1;
  int to_supervisor_fd = -1;
  std::string python = "/usr/bin/python3";
  std::string harness;
  harness_mode mode = harness_mode::reuse;
  /// A sealed memfd holding the sandbox spec (platform/linux/sandbox_spec.hpp);
  /// -1: no sandbox (the worker runs as a plain process).
  int sandbox_spec_fd = -1;
  /// An AF_UNIX socket to the supervisor (-1: none): the interpreter child
  /// sends its seccomp listener over it, and the harness then receives the
  /// details of each denial on it (docs/wire.md, "Denials").
  int control_fd = -1;
  /// The write end of a pipe to the supervisor (-1: none) on which PID 1
  /// reports a sandbox layer it could not apply: the supervisor names a
  /// layer only from there, never from an exit status (which the code can
  /// choose once it runs). Close-on-exec here, so that no process of the
  /// sandbox but PID 1 ever holds it.
  int status_fd = -1;
  bool help = false; ///< --help: print usage and exit 0
};

/// The wire name of a mode ("reuse", "fork", "oneshot", "session").
const char* to_string(harness_mode mode) noexcept;

/// Parses `argv[1..argc)`. A failure's message says which argument is wrong
/// and why; the caller prints it with the usage and exits 2.
outcome<options> parse_options(int argc, const char* const* argv);

/// The usage text (ends with a newline).
std::string usage();

} // namespace castellan::worker
