#include "actors/policy/engine/ports.hpp"

namespace castellan::policy {

namespace {

outcome<uint16_t> parse_port(std::string_view text, std::string_view whole) {
  if (text.empty())
    return logic_failure("empty port in '" + std::string{whole} + "'");
  if (text.size() > 5)
    return logic_failure("port '" + std::string{text} + "' is out of range 0..65535");
  if (text.size() > 1 && text.front() == '0')
    return logic_failure("port '" + std::string{text} + "' has a leading zero");
  uint32_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return logic_failure("unexpected character '" + std::string(1, c) + "' in port '" +
                           std::string{text} + "' (expected digits, ',' or '-')");
    value = value * 10u + static_cast<uint32_t>(c - '0');
  }
  if (value > 65535u)
    return logic_failure("port " + std::to_string(value) + " is out of range 0..65535");
  return static_cast<uint16_t>(value);
}

} // namespace

outcome<std::vector<port_range>> parse_port_spec(std::string_view text) {
  if (text.empty())
    return logic_failure("port specification is empty");
  std::vector<port_range> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string_view::npos)
      comma = text.size();
    const std::string_view item = text.substr(start, comma - start);
    if (item.empty())
      return logic_failure("empty element in port list '" + std::string{text} + "'");
    const size_t dash = item.find('-');
    port_range r;
    if (dash == std::string_view::npos) {
      auto p = parse_port(item, text);
      if (!p)
        return p.error();
      r.from = r.to = *p;
    } else {
      auto from = parse_port(item.substr(0, dash), text);
      if (!from)
        return from.error();
      auto to = parse_port(item.substr(dash + 1), text);
      if (!to)
        return to.error();
      if (*from > *to)
        return logic_failure("range '" + std::string{item} + "' has from > to");
      r.from = *from;
      r.to = *to;
    }
    out.push_back(r);
    start = comma + 1;
  }
  return out;
}

bool ports_contain(const std::vector<port_range>& ranges, uint16_t port) noexcept {
  for (const auto& r : ranges)
    if (r.contains(port))
      return true;
  return false;
}

} // namespace castellan::policy
