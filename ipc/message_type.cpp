/// @file message_type.cpp
/// The wire type catalog: raw byte → enum, names, directions.

#include "ipc/message_type.hpp"

namespace castellan::ipc {

std::optional<message_type> to_message_type(uint8_t raw) noexcept {
  // A switch over the raw byte rather than a range check: the values have
  // gaps (0x0C…0x0F, 0x13…0x1F) that a hostile peer must not slip through.
  switch (raw) {
  case 0x00:
  case 0x01:
  case 0x02:
  case 0x03:
  case 0x04:
  case 0x05:
  case 0x06:
  case 0x07:
  case 0x08:
  case 0x09:
  case 0x0A:
  case 0x0B:
  case 0x10:
  case 0x11:
  case 0x12:
  case 0x20:
  case 0x21:
  case 0x22:
  case 0x23:
  case 0x24:
    return static_cast<message_type>(raw);
  default:
    return std::nullopt;
  }
}

std::string_view to_string(message_type type) noexcept {
  switch (type) {
  case message_type::stdout_data:
    return "STDOUT";
  case message_type::fs_read:
    return "FS_READ";
  case message_type::fs_write:
    return "FS_WRITE";
  case message_type::net_connect:
    return "NET_CONNECT";
  case message_type::exec:
    return "EXEC";
  case message_type::listdir:
    return "LISTDIR";
  case message_type::stderr_data:
    return "STDERR";
  case message_type::result:
    return "RESULT";
  case message_type::ready:
    return "READY";
  case message_type::state:
    return "STATE";
  case message_type::warn:
    return "WARN";
  case message_type::file:
    return "FILE";
  case message_type::allow:
    return "ALLOW";
  case message_type::deny:
    return "DENY";
  case message_type::warn_allow:
    return "WARN_ALLOW";
  case message_type::code:
    return "CODE";
  case message_type::command:
    return "COMMAND";
  case message_type::shutdown:
    return "SHUTDOWN";
  case message_type::tighten:
    return "TIGHTEN";
  case message_type::setup:
    return "SETUP";
  }
  return "UNKNOWN";
}

bool is_worker_to_supervisor(message_type type) noexcept {
  return static_cast<uint8_t>(type) <= static_cast<uint8_t>(message_type::file);
}

} // namespace castellan::ipc
