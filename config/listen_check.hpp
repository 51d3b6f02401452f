#pragma once

/// @file listen_check.hpp
/// The check of one `listen` entry of the config.

#include <string>
#include <string_view>

namespace castellan::config {

/// Why `address` is not a listen address, or empty when it is one. The
/// API's own parser (api::parse_listen_address) decides, so that
/// `config check` and `castellan serve --listen` accept the same addresses.
std::string check_listen_address(std::string_view address);

/// Why the listener `address` (a valid one) is not allowed with these
/// settings, or empty when it is: a `tls:` listener needs `[tls]` and a
/// tokens file (it is how remote clients come in); a plain `tcp:` listener
/// is allowed on loopback only, and only with
/// `auth.allow_plaintext_loopback = true`. `castellan serve` checks its
/// `--listen` addresses with it too.
std::string check_listener_security(std::string_view address, bool allow_plaintext_loopback,
                                    bool tokens_file, bool tls);

} // namespace castellan::config
