#include "actors/api/listen_address.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cctype>

namespace castellan::api {

namespace {

/// sun_path holds 108 bytes, the terminating NUL included.
constexpr std::size_t max_unix_path = sizeof(sockaddr_un::sun_path) - 1;

failure bad(std::string_view text, const std::string& why) {
  return logic_failure("listen address '" + std::string(text) + "': " + why);
}

bool valid_host_name(std::string_view host) {
  if (host.empty() || host.size() > 253)
    return false;
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isalnum(u) || c == '-' || c == '.' || c == '_'))
      return false;
  }
  return true;
}

bool valid_ipv6_text(std::string_view host) {
  if (host.empty() || host.size() > 45)
    return false;
  for (char c : host) {
    const auto u = static_cast<unsigned char>(c);
    if (!(std::isxdigit(u) || c == ':' || c == '.'))
      return false;
  }
  return host.find(':') != std::string_view::npos;
}

} // namespace

std::string listen_address::to_string() const {
  if (type == kind::unix_socket)
    return "unix:" + path;
  const bool v6 = host.find(':') != std::string::npos;
  return (tls ? "tls:" : "tcp:") + (v6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

bool is_loopback_host(std::string_view host) {
  if (host == "localhost")
    return true;
  const std::string text(host);
  in_addr v4{};
  if (::inet_pton(AF_INET, text.c_str(), &v4) == 1)
    return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (::inet_pton(AF_INET6, text.c_str(), &v6) == 1)
    return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;
}

outcome<listen_address> parse_listen_address(std::string_view text) {
  listen_address out;
  if (text.substr(0, 5) == "unix:") {
    std::string_view path = text.substr(5);
    if (path.empty())
      return bad(text, "the unix socket path is empty (unix:/run/castellan/castellan.sock)");
    if (path.front() != '/')
      return bad(text, "the unix socket path '" + std::string(path) + "' is not absolute");
    if (path.find('\0') != std::string_view::npos)
      return bad(text, "the unix socket path contains a NUL byte");
    if (path.size() > max_unix_path)
      return bad(text, "the unix socket path is " + std::to_string(path.size()) +
                           " bytes long; at most " + std::to_string(max_unix_path) + " fit");
    if (path.back() == '/')
      return bad(text, "the unix socket path '" + std::string(path) + "' names a directory");
    out.type = listen_address::kind::unix_socket;
    out.path = std::string(path);
    return out;
  }
  if (text.substr(0, 4) == "tcp:" || text.substr(0, 4) == "tls:") {
    std::string_view rest = text.substr(4);
    std::string_view host;
    std::string_view port;
    if (!rest.empty() && rest.front() == '[') {
      auto close = rest.find(']');
      if (close == std::string_view::npos)
        return bad(text, "the IPv6 host has no closing ']'");
      host = rest.substr(1, close - 1);
      if (!valid_ipv6_text(host))
        return bad(text, "the host '[" + std::string(host) + "]' is not an IPv6 address");
      if (close + 1 >= rest.size() || rest[close + 1] != ':')
        return bad(text, "no ':PORT' after the host '[" + std::string(host) + "]'");
      port = rest.substr(close + 2);
    } else {
      auto colon = rest.rfind(':');
      if (colon == std::string_view::npos)
        return bad(text, "no ':PORT' after the host (tcp:HOST:PORT)");
      host = rest.substr(0, colon);
      port = rest.substr(colon + 1);
      if (host.find(':') != std::string_view::npos)
        return bad(text, "the host '" + std::string(host) +
                             "' has a ':'; write an IPv6 host in brackets, tcp:[::1]:PORT");
      if (host.empty())
        return bad(text, "the host is empty (tcp:127.0.0.1:PORT)");
      if (!valid_host_name(host))
        return bad(text, "the host '" + std::string(host) + "' is not an address or a name");
    }
    if (port.empty())
      return bad(text, "the port is empty");
    if (port.size() > 5)
      return bad(text, "the port '" + std::string(port) + "' is not a number from 0 to 65535");
    uint32_t value = 0;
    for (char c : port) {
      if (c < '0' || c > '9')
        return bad(text, "the port '" + std::string(port) + "' is not a number from 0 to 65535");
      value = value * 10 + static_cast<uint32_t>(c - '0');
    }
    if (value > 65535)
      return bad(text, "the port '" + std::string(port) + "' is not a number from 0 to 65535");
    out.type = listen_address::kind::tcp;
    out.tls = text.substr(0, 4) == "tls:";
    out.host = std::string(host);
    out.port = static_cast<uint16_t>(value);
    return out;
  }
  return bad(text, "the scheme is not 'unix:', 'tcp:' or 'tls:' (unix:PATH, tcp:HOST:PORT or "
                   "tls:HOST:PORT)");
}

} // namespace castellan::api
