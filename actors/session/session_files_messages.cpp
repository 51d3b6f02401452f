#include "actors/session/session_files_messages.hpp"

namespace castellan {

std::string to_string(files_op x) {
  switch (x) {
    case files_op::stat:
      return "stat";
    case files_op::list:
      return "list";
    case files_op::upload:
      return "upload";
    case files_op::remove:
      return "remove";
    case files_op::mkdir:
      return "mkdir";
  }
  return "files_op(" + std::to_string(static_cast<int>(x)) + ")";
}

} // namespace castellan
