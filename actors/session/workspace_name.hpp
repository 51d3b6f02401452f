#pragma once

/// @file workspace_name.hpp
/// What a workspace may be called: [a-z0-9][a-z0-9._-]{0,62}. The name
/// becomes a file name in the store (and nothing else), so it can hold no
/// '/', cannot be "." or "..", and cannot start with a dot or a dash.

#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan {

/// The longest name accepted.
inline constexpr std::size_t workspace_name_max = 63;

/// Success for a valid name; else a failure that says what is wrong with it.
outcome<void> validate_workspace_name(std::string_view name);

} // namespace castellan
