#include "config/listen_check.hpp"

namespace castellan::config {

std::string check_listen_address(std::string_view address) {
  for (std::string_view scheme : {"unix:", "tcp:"})
    if (address.substr(0, scheme.size()) == scheme) {
      if (address.size() == scheme.size())
        return "nothing after \"" + std::string(scheme) + "\"";
      return {};
    }
  return "must start with \"unix:\" (a socket path) or \"tcp:\" (host and port)";
}

} // namespace castellan::config
