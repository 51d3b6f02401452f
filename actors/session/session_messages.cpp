#include "actors/session/session_messages.hpp"

namespace castellan {

std::string to_string(session_state x) {
  switch (x) {
    case session_state::starting:
      return "starting";
    case session_state::ready:
      return "ready";
    case session_state::running:
      return "running";
    case session_state::ended:
      return "ended";
  }
  return "session_state(" + std::to_string(static_cast<int>(x)) + ")";
}

} // namespace castellan
