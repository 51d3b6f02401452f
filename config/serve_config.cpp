#include "config/serve_config.hpp"

#include <unistd.h>

#include <cstdlib>

namespace castellan::config {

namespace {

std::string env_or_empty(const char* name) {
  const char* value = std::getenv(name);
  return value && *value == '/' ? std::string{value} : std::string{};
}

} // namespace

std::string default_listen_address() {
  if (::geteuid() == 0)
    return "unix:/run/castellan/castellan.sock";
  std::string dir = env_or_empty("XDG_RUNTIME_DIR");
  if (dir.empty())
    dir = "/run/user/" + std::to_string(::geteuid());
  return "unix:" + dir + "/castellan.sock";
}

std::string default_state_dir() {
  if (::geteuid() == 0)
    return "/var/lib/castellan";
  if (auto dir = env_or_empty("XDG_STATE_HOME"); !dir.empty())
    return dir + "/castellan";
  if (auto home = env_or_empty("HOME"); !home.empty())
    return home + "/.local/state/castellan";
  // Never a directory others can create first (/tmp, /var/tmp): this one
  // fails clearly when the user cannot write it.
  return "/var/lib/castellan";
}

} // namespace castellan::config
