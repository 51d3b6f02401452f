#include "config/config_error.hpp"

namespace castellan::config {

std::string config_error::describe() const {
  std::string out = file.empty() ? std::string{"<input>"} : file;
  if (line != 0) {
    out += ':' + std::to_string(line);
    if (column != 0)
      out += ':' + std::to_string(column);
  }
  out += ": ";
  if (!key.empty())
    out += key + ": ";
  if (!value.empty())
    out += value + ": ";
  out += message;
  return out;
}

} // namespace castellan::config
