#pragma once

/// @file path.hpp
/// Path normalisation and glob matching, shared by the rule loader, the
/// compiled engine and the linear evaluator.
///
/// Paths are compared component by component. A rule path is a pattern whose
/// components are literal text, text with `*` (any run of characters inside
/// one component, possibly empty) or exactly `**` (any number of whole
/// components, including none). A rule covers the path it names and
/// everything beneath it: `/tmp` covers `/tmp` and `/tmp/x`, never `/tmpfile`.

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace castellan::policy {

/// The components of a normalised absolute path, without allocating for
/// paths of up to `inline_capacity` components (and without clearing its
/// buffer: it sits on the hot path of every check). Views point into the
/// input, which must outlive this object.
class path_components {
public:
  static constexpr size_t inline_capacity = 64;

  path_components() noexcept {} // NOLINT: the buffer is written before it is read

  /// Splits `path`: collapses "//", drops ".", resolves ".." lexically (never
  /// above "/"), ignores a trailing "/". False if `path` is not absolute or
  /// contains a NUL byte.
  bool assign(std::string_view path);

  size_t size() const noexcept { return size_; }
  bool empty() const noexcept { return size_ == 0; }
  std::string_view operator[](size_t i) const noexcept {
    const piece& p = i < inline_capacity ? inline_[i] : overflow_[i - inline_capacity];
    return std::string_view{base_ + p.offset, p.length};
  }

private:
  struct piece {
    uint32_t offset;
    uint32_t length;
  };

  void push(piece p) {
    if (size_ < inline_capacity)
      inline_[size_] = p;
    else
      overflow_.push_back(p);
    ++size_;
  }
  void pop() noexcept {
    if (size_ == 0)
      return;
    if (size_ > inline_capacity)
      overflow_.pop_back();
    --size_;
  }

  const char* base_ = nullptr;
  size_t size_ = 0;
  piece inline_[inline_capacity];
  std::vector<piece> overflow_;
};

/// The normalised form of an absolute path ("/a/./b//c/../" → "/a/b"), or
/// nothing when `path` is not absolute or contains a NUL byte.
std::optional<std::string> normalize_path(std::string_view path);

/// Checks a rule path pattern and returns why it is invalid, or nothing when
/// it is valid: absolute, no NUL byte, no "." or ".." component, `**` only as
/// a whole component.
std::optional<std::string> check_path_pattern(std::string_view pattern);

/// The normalised components of a valid rule pattern (see check_path_pattern).
std::vector<std::string> pattern_components(std::string_view pattern);

/// The canonical text of a valid rule pattern ("/tmp//x/" → "/tmp/x").
std::string normalize_pattern(std::string_view pattern);

/// True when the component pattern contains a `*` (a glob component).
bool is_glob_component(std::string_view component) noexcept;

/// Matches one path component against one pattern component with `*`
/// wildcards (`**` is handled by the caller, never passed here).
bool match_component(std::string_view pattern, std::string_view text) noexcept;

} // namespace castellan::policy
