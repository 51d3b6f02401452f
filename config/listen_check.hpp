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

} // namespace castellan::config
