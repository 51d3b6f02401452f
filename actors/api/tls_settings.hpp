#pragma once

/// @file tls_settings.hpp
/// What a `tls:` listener presents and how its TLS is set up (OpenSSL):
/// TLS 1.2 or later, no compression, no renegotiation, OpenSSL's default
/// ciphers at security level 2. Beast-free, so that the config loader
/// checks the files with the rules the server applies.

#include <string>

struct ssl_ctx_st;

namespace castellan::api {

/// The certificate chain (PEM, the server's certificate first) and its
/// private key (PEM, not encrypted) of the `tls:` listeners.
struct tls_files {
  std::string cert_file;
  std::string key_file;

  bool enabled() const { return !cert_file.empty(); }
};

/// Sets up a server context: the protocol floor, options and security
/// level above, then the chain and the key, which must match. Why it
/// failed (OpenSSL's reason, naming the file), or empty.
std::string configure_server_tls(ssl_ctx_st* ctx, const tls_files& files);

/// configure_server_tls on a context of its own: what `castellan config
/// check` and the config loader report.
std::string check_tls_files(const tls_files& files);

} // namespace castellan::api
