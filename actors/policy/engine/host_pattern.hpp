#pragma once

/// @file host_pattern.hpp
/// Host name patterns of net.hosts: `example.com` names exactly that host,
/// `*.github.com` names every host below github.com at any depth (never
/// github.com itself), and `*` names every host. Comparison ignores ASCII case
/// and one trailing dot.

#include <optional>
#include <string>
#include <string_view>

namespace castellan::policy {

/// Why `pattern` is not a valid host pattern, or nothing when it is valid:
/// labels of 1..63 characters from [A-Za-z0-9_-] that neither start nor end
/// with '-', at most 253 characters, and `*` only as the whole first label.
std::optional<std::string> check_host_pattern(std::string_view pattern);

/// Lower-cases `host` and removes one trailing dot.
std::string normalize_host(std::string_view host);

/// Matches a normalised host against a normalised, valid pattern.
bool host_matches(std::string_view pattern, std::string_view host) noexcept;

} // namespace castellan::policy
