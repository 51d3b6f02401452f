#pragma once

/// @file message_type.hpp
/// The catalog of frame types on the worker wire (see docs/wire.md).

#include <cstdint>
#include <optional>
#include <string_view>

namespace castellan::ipc {

enum class message_type : uint8_t {
  stdout_data = 0x00, ///< worker → sup: bytes the code wrote to stdout
  fs_read = 0x01,     ///< worker → sup: optimistic read check
  fs_write = 0x02,    ///< worker → sup: synchronous write check
  net_connect = 0x03, ///< worker → sup: synchronous connect check
  exec = 0x04,        ///< worker → sup: synchronous exec check
  listdir = 0x05,     ///< worker → sup: optimistic directory listing check
  stderr_data = 0x06, ///< worker → sup: bytes the code wrote to stderr
  result = 0x07,      ///< worker → sup: JSON outcome of a CODE/COMMAND
  ready = 0x08,       ///< worker → sup: JSON, the worker is warm
  state = 0x09,       ///< worker → sup: JSON state event
  warn = 0x0A,        ///< worker → sup: a warning raised by the worker itself
  file = 0x0B,        ///< worker → sup: a piece of a requested file (files_out), or why not
  allow = 0x10,       ///< sup → worker: check answer
  deny = 0x11,        ///< sup → worker: check answer with the reason
  warn_allow = 0x12,  ///< sup → worker: allowed and recorded as a warning
  code = 0x20,        ///< sup → worker: Python source to run
  command = 0x21,     ///< sup → worker: argv, NUL-terminated arguments
  shutdown = 0x22,    ///< sup → worker: finish and exit 0
  tighten = 0x23,     ///< sup → worker: JSON, restrictions for the next CODE's process
  setup = 0x24,       ///< sup → worker: env, cwd and stdin of the next CODE/COMMAND
};

/// The type for a byte read off the wire, or nothing if no such type exists.
std::optional<message_type> to_message_type(uint8_t raw) noexcept;

/// The upper-case wire name ("STDOUT", "CODE", …).
std::string_view to_string(message_type type) noexcept;

/// True for the types only a worker may send (what the supervisor accepts).
bool is_worker_to_supervisor(message_type type) noexcept;

} // namespace castellan::ipc
