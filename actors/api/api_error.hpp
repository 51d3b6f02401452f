#pragma once

/// @file api_error.hpp
/// The one form of every error the API answers:
/// `{"v":1,"error":{"code":"…","message":"…","field":"/…"}}`.

#include <string>
#include <string_view>

namespace castellan::api {

/// The JSON text of an error; `field` (a JSON pointer into the request
/// body) is left out when empty.
std::string error_body(std::string_view code, std::string_view message,
                       std::string_view field = {});

} // namespace castellan::api
