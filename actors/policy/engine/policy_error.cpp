#include "actors/policy/engine/policy_error.hpp"

namespace castellan::policy {

std::string policy_error::describe() const {
  std::string out = file.empty() ? std::string{"<input>"} : file;
  out += ": ";
  out += pointer.empty() ? std::string{"/"} : pointer;
  if (!value.empty()) {
    out += ": ";
    out += value;
  }
  out += ": ";
  out += message;
  return out;
}

} // namespace castellan::policy
