#include "actors/policy/engine/path.hpp"

namespace castellan::policy {

bool path_components::assign(std::string_view path) {
  size_ = 0;
  overflow_.clear();
  base_ = path.data();
  if (path.empty() || path.front() != '/' || path.size() > UINT32_MAX)
    return false;
  if (std::memchr(path.data(), '\0', path.size()) != nullptr)
    return false;
  const char* const begin = path.data();
  const char* const end = begin + path.size();
  // Components are short: a plain scan beats a memchr call per component.
  const char* p = begin;
  while (p < end) {
    if (*p == '/') {
      ++p;
      continue;
    }
    const char* slash = p + 1;
    while (slash < end && *slash != '/')
      ++slash;
    const auto len = static_cast<uint32_t>(slash - p);
    if (len == 1 && p[0] == '.') {
      // "." names the same directory
    } else if (len == 2 && p[0] == '.' && p[1] == '.') {
      // Lexical: "/.." is "/", as the kernel resolves it at the root.
      pop();
    } else {
      push(piece{static_cast<uint32_t>(p - begin), len});
    }
    p = slash;
  }
  return true;
}

std::optional<std::string> normalize_path(std::string_view path) {
  path_components comps;
  if (!comps.assign(path))
    return std::nullopt;
  std::string out;
  out.reserve(path.size());
  for (size_t i = 0; i < comps.size(); ++i) {
    out += '/';
    out += comps[i];
  }
  if (out.empty())
    out = "/";
  return out;
}

std::optional<std::string> check_path_pattern(std::string_view pattern) {
  if (pattern.empty())
    return std::string{"path is empty"};
  if (pattern.front() != '/')
    return std::string{"path must be absolute (start with '/')"};
  if (pattern.find('\0') != std::string_view::npos)
    return std::string{"path contains a NUL byte"};
  size_t i = 0;
  while (i < pattern.size()) {
    while (i < pattern.size() && pattern[i] == '/')
      ++i;
    const size_t start = i;
    while (i < pattern.size() && pattern[i] != '/')
      ++i;
    const std::string_view c = pattern.substr(start, i - start);
    if (c.empty())
      continue;
    if (c == "." || c == "..")
      return "'" + std::string{c} + "' components are not allowed in rule paths";
    if (c != "**" && c.find("**") != std::string_view::npos)
      return "'**' must be a whole path component (found in '" + std::string{c} + "')";
  }
  return std::nullopt;
}

std::vector<std::string> pattern_components(std::string_view pattern) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i < pattern.size()) {
    while (i < pattern.size() && pattern[i] == '/')
      ++i;
    const size_t start = i;
    while (i < pattern.size() && pattern[i] != '/')
      ++i;
    if (i > start)
      out.emplace_back(pattern.substr(start, i - start));
  }
  return out;
}

std::string normalize_pattern(std::string_view pattern) {
  std::string out;
  for (auto& c : pattern_components(pattern)) {
    out += '/';
    out += c;
  }
  if (out.empty())
    out = "/";
  return out;
}

bool is_glob_component(std::string_view component) noexcept {
  return component.find('*') != std::string_view::npos;
}

bool match_component(std::string_view pattern, std::string_view text) noexcept {
  // Iterative wildcard match with single backtrack point: O(n*m) worst case,
  // no recursion, so hostile patterns cannot exhaust the stack.
  size_t p = 0;
  size_t t = 0;
  size_t star = std::string_view::npos;
  size_t mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

} // namespace castellan::policy
