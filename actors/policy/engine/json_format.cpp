#include "actors/policy/engine/json_format.hpp"

namespace castellan::policy {

namespace {

using ojson = nlohmann::ordered_json;

std::string scalar(const ojson& v) {
  return v.dump(-1, ' ', false, ojson::error_handler_t::replace);
}

// The one-line form, or "" when `v` holds an object or array nested two deep
// (a list of rules never goes on one line).
std::string one_line(const ojson& v, int depth = 0) {
  if (!v.is_structured())
    return scalar(v);
  if (depth >= 2 || v.empty())
    return v.empty() ? (v.is_array() ? "[]" : "{}") : std::string{};
  std::string out = v.is_array() ? "[" : "{ ";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first)
      out += ", ";
    first = false;
    if (v.is_object())
      out += scalar(ojson(it.key())) + ": ";
    const std::string inner = one_line(*it, depth + 1);
    if (inner.empty())
      return {};
    out += inner;
  }
  out += v.is_array() ? "]" : " }";
  return out;
}

void format(const ojson& v, size_t indent, size_t width, std::string& out) {
  if (!v.is_structured()) {
    out += scalar(v); // long strings stay whole
    return;
  }
  const std::string line = one_line(v);
  if (!line.empty() && indent + line.size() <= width) {
    out += line;
    return;
  }
  const std::string pad(indent + 2, ' ');
  out += v.is_array() ? "[\n" : "{\n";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (!first)
      out += ",\n";
    first = false;
    out += pad;
    if (v.is_object())
      out += scalar(ojson(it.key())) + ": ";
    format(*it, indent + 2, width, out);
  }
  out += "\n" + std::string(indent, ' ') + (v.is_array() ? "]" : "}");
}

} // namespace

std::string format_json(const nlohmann::ordered_json& value, size_t width) {
  std::string out;
  format(value, 0, width, out);
  return out;
}

} // namespace castellan::policy
