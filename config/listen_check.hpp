#pragma once

/// @file listen_check.hpp
/// The check of one `listen` entry of the config.

#include <string>
#include <string_view>

namespace castellan::config {

/// Why `address` is not a listen address, or empty when it is one.
///
/// Until the API's own parser of listen addresses exists, this checks only
/// the form: a non-empty "unix:" path or "tcp:" host and port. Once it
/// exists, this is the one place that calls it, so that `config check` and
/// `castellan serve` accept exactly the same addresses.
std::string check_listen_address(std::string_view address);

} // namespace castellan::config
