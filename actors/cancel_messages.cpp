#include "actors/cancel_messages.hpp"

namespace castellan {

std::string to_string(cancel_outcome x) {
  switch (x) {
    case cancel_outcome::cancelled_running:
      return "cancelled_running";
    case cancel_outcome::cancelled_queued:
      return "cancelled_queued";
    case cancel_outcome::already_finished:
      return "already_finished";
    case cancel_outcome::unknown:
      return "unknown";
  }
  return "cancel_outcome(" + std::to_string(static_cast<int>(x)) + ")";
}

} // namespace castellan
