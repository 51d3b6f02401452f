#include "config/listen_check.hpp"

#include "actors/api/listen_address.hpp"

namespace castellan::config {

std::string check_listen_address(std::string_view address) {
  auto parsed = api::parse_listen_address(address);
  if (parsed)
    return {};
  // The config error shows the value already: keep only the reason.
  std::string why = parsed.error().describe();
  const std::string prefix = "listen address '" + std::string(address) + "': ";
  if (why.compare(0, prefix.size(), prefix) == 0)
    why.erase(0, prefix.size());
  return why;
}

} // namespace castellan::config
