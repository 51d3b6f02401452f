#include "actors/session/workspace_name.hpp"

#include <string>

namespace castellan {

namespace {

bool lower_alnum(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/// The name as it can be shown in a message: printable, cut short.
std::string shown(std::string_view name) {
  std::string out;
  for (char c : name.substr(0, 80)) {
    const auto u = static_cast<unsigned char>(c);
    out += (u >= 0x20 && u < 0x7f) ? std::string(1, c) : "\\x" + std::to_string(u);
  }
  return name.size() > 80 ? out + "…" : out;
}

} // namespace

outcome<void> validate_workspace_name(std::string_view name) {
  const std::string rule = " (a workspace name is 1 to 63 of a-z 0-9 . _ -, starting with a "
                           "letter or digit)";
  if (name.empty())
    return logic_failure("workspace name is empty" + rule);
  if (name.size() > workspace_name_max)
    return logic_failure("workspace name '" + shown(name) + "' is " +
                         std::to_string(name.size()) + " characters long, more than " +
                         std::to_string(workspace_name_max) + rule);
  if (!lower_alnum(name.front()))
    return logic_failure("workspace name '" + shown(name) + "' starts with '" +
                         shown(name.substr(0, 1)) + "'" + rule);
  for (char c : name)
    if (!lower_alnum(c) && c != '.' && c != '_' && c != '-')
      return logic_failure("workspace name '" + shown(name) + "' contains '" +
                           shown(std::string_view(&c, 1)) + "'" + rule);
  return {};
}

} // namespace castellan
