#include "actors/api/api_error.hpp"

#include <nlohmann/json.hpp>

namespace castellan::api {

std::string error_body(std::string_view code, std::string_view message, std::string_view field) {
  nlohmann::json err = {{"code", code}, {"message", message}};
  if (!field.empty())
    err["field"] = field;
  nlohmann::json out = {{"v", 1}, {"error", std::move(err)}};
  // A message may quote a client's bytes: never throw on invalid UTF-8.
  return out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace castellan::api
