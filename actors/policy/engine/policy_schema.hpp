#pragma once

/// @file policy_schema.hpp
/// policies/schema.json, embedded into the binary at build time so that the
/// engine never depends on a path at run time.

#include <string_view>

namespace castellan::policy {

/// The text of policies/schema.json as it was when the engine was built.
std::string_view policy_schema_text() noexcept;

} // namespace castellan::policy
