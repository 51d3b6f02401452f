#include "actors/policy/engine/host_pattern.hpp"

namespace castellan::policy {

namespace {

constexpr size_t max_host_length = 253;
constexpr size_t max_label_length = 63;

bool is_label_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

} // namespace

std::optional<std::string> check_host_pattern(std::string_view pattern) {
  if (pattern.empty())
    return std::string{"host pattern is empty"};
  if (pattern == "*")
    return std::nullopt;
  std::string_view rest = pattern;
  if (rest.back() == '.')
    rest.remove_suffix(1);
  if (rest.size() >= 2 && rest.substr(0, 2) == "*.")
    rest.remove_prefix(2);
  if (rest.empty())
    return std::string{"host pattern has no labels"};
  if (rest.size() > max_host_length)
    return std::string{"host pattern is longer than 253 characters"};
  size_t start = 0;
  while (start <= rest.size()) {
    size_t dot = rest.find('.', start);
    if (dot == std::string_view::npos)
      dot = rest.size();
    const std::string_view label = rest.substr(start, dot - start);
    if (label.empty())
      return std::string{"empty label (\"..\" or a leading dot)"};
    if (label.size() > max_label_length)
      return "label '" + std::string{label} + "' is longer than 63 characters";
    for (char c : label) {
      if (c == '*')
        return std::string{"'*' is only allowed as the whole first label (\"*.example.com\")"};
      if (!is_label_char(c))
        return "invalid character '" + std::string(1, c) + "' in label '" + std::string{label} +
               "'";
    }
    if (label.front() == '-' || label.back() == '-')
      return "label '" + std::string{label} + "' starts or ends with '-'";
    start = dot + 1;
  }
  return std::nullopt;
}

std::string normalize_host(std::string_view host) {
  if (!host.empty() && host.back() == '.')
    host.remove_suffix(1);
  std::string out{host};
  for (auto& c : out)
    if (c >= 'A' && c <= 'Z')
      c = static_cast<char>(c - 'A' + 'a');
  return out;
}

bool host_matches(std::string_view pattern, std::string_view host) noexcept {
  if (host.empty())
    return false;
  if (pattern == "*")
    return true;
  if (pattern.size() >= 2 && pattern[0] == '*' && pattern[1] == '.') {
    const std::string_view suffix = pattern.substr(1); // ".github.com"
    return host.size() > suffix.size() && host.substr(host.size() - suffix.size()) == suffix;
  }
  return pattern == host;
}

} // namespace castellan::policy
