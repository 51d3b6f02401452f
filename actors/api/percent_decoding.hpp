#pragma once

/// @file percent_decoding.hpp
/// Percent-decoding (RFC 3986) of a URL's path or query parts, shared by
/// the routes that take names from a request target.

#include <string>
#include <string_view>

namespace castellan::api {

/// Decodes `in` into `out`; false on a malformed escape ("%", "%4", "%zz").
bool percent_decode(std::string_view in, std::string& out);

} // namespace castellan::api
