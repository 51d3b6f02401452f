#include "actors/api/tls_settings.hpp"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

namespace castellan::api {

namespace {

/// OpenSSL's queued errors as text (the queue emptied).
std::string openssl_errors() {
  std::string out;
  char buf[256];
  while (unsigned long e = ERR_get_error()) {
    ERR_error_string_n(e, buf, sizeof buf);
    out += (out.empty() ? "" : "; ") + std::string(buf);
  }
  return out.empty() ? "unknown OpenSSL error" : out;
}

/// A key file with a passphrase would make OpenSSL ask for it on the
/// terminal; this callback gives none, and the load fails instead.
int no_passphrase(char*, int, int, void*) {
  return 0;
}

} // namespace

std::string configure_server_tls(ssl_ctx_st* ctx, const tls_files& files) {
  ERR_clear_error();
  if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
    return "cannot require TLS 1.2: " + openssl_errors();
  // No compression (CRIME), no renegotiation (a client's renegotiations
  // cost the server a handshake each, and TLS 1.3 has none), the server's
  // cipher order.
  SSL_CTX_set_options(ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION |
                               SSL_OP_CIPHER_SERVER_PREFERENCE);
  SSL_CTX_set_security_level(ctx, 2);
  // Idle connections keep no read and write buffers.
  SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
  SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
  if (SSL_CTX_use_certificate_chain_file(ctx, files.cert_file.c_str()) != 1)
    return "certificate chain " + files.cert_file + ": " + openssl_errors();
  if (SSL_CTX_use_PrivateKey_file(ctx, files.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    const bool mismatch = ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH;
    return "private key " + files.key_file +
           (mismatch ? " does not match the certificate " + files.cert_file : std::string()) +
           ": " + openssl_errors();
  }
  if (SSL_CTX_check_private_key(ctx) != 1)
    return "private key " + files.key_file + " does not match the certificate " + files.cert_file +
           ": " + openssl_errors();
  return {};
}

std::string check_tls_files(const tls_files& files) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (!ctx)
    return "SSL_CTX_new: " + openssl_errors();
  std::string why = configure_server_tls(ctx, files);
  SSL_CTX_free(ctx);
  return why;
}

} // namespace castellan::api
