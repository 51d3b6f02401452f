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

std::string check_listener_security(std::string_view address, bool allow_plaintext_loopback,
                                    bool tokens_file, bool tls) {
  auto parsed = api::parse_listen_address(address);
  if (!parsed || parsed->type == api::listen_address::kind::unix_socket)
    return {};
  if (parsed->tls) {
    if (!tls && !tokens_file)
      return "a TLS listener needs [tls] cert_file and key_file, and auth.tokens_file";
    if (!tls)
      return "a TLS listener needs [tls] cert_file and key_file";
    if (!tokens_file)
      return "a TLS listener needs auth.tokens_file: without tokens it would admit anyone who "
             "can reach it";
    return {};
  }
  if (!api::is_loopback_host(parsed->host))
    return "not a loopback address: plain TCP listens on loopback only; elsewhere use TLS "
           "(tls:HOST:PORT, with [tls] and auth.tokens_file)";
  if (!allow_plaintext_loopback)
    return std::string("plain TCP on loopback lets any local user connect: set "
                       "auth.allow_plaintext_loopback = true to allow it") +
           (tokens_file ? "" : " (and auth.tokens_file to require tokens)");
  return {};
}

} // namespace castellan::config
