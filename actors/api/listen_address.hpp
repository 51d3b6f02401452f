#pragma once

/// @file listen_address.hpp
/// Where the daemon's API listens: `unix:PATH` or `tcp:HOST:PORT`. CAF-free
/// and Beast-free, so that the config loader parses its `listen = [...]`
/// strings with the same rules and messages as `castellan serve --listen`.

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan::api {

/// One listener of the API.
struct listen_address {
  enum class kind : uint8_t { unix_socket, tcp };
  kind type = kind::unix_socket;
  std::string path;  ///< unix: the socket's absolute path
  std::string host;  ///< tcp: an IPv4 address, an IPv6 address (without brackets) or a name
  uint16_t port = 0; ///< tcp: 0 lets the kernel choose (tests)
  bool tls = false;  ///< tcp: TLS on it (`tls:HOST:PORT`), else plain (`tcp:HOST:PORT`)

  /// The canonical text: `unix:/run/castellan.sock`, `tcp:127.0.0.1:8080`,
  /// `tcp:[::1]:8080`, `tls:0.0.0.0:8443`.
  std::string to_string() const;
};

/// Whether a TCP listener's host is this machine's loopback: `localhost`,
/// an IPv4 address in 127.0.0.0/8, or `::1`.
bool is_loopback_host(std::string_view host);

/// Parses `unix:PATH` (an absolute path of at most 107 bytes, no NUL),
/// `tcp:HOST:PORT` or `tls:HOST:PORT` (HOST an IPv4 address, `[IPv6]` or a
/// DNS name; PORT 0-65535). The failure names the part that is wrong.
outcome<listen_address> parse_listen_address(std::string_view text);

} // namespace castellan::api
