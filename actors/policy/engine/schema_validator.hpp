#pragma once

/// @file schema_validator.hpp
/// Validation of a policy document against the embedded schema (valijson),
/// with every error turned into a policy_error naming the JSON pointer, the
/// offending value and the schema rule.

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_error.hpp"

namespace castellan::policy {

/// Every schema violation in `doc`; empty when it conforms. Thread-safe.
std::vector<policy_error> validate_against_schema(const nlohmann::json& doc, std::string_view file);

} // namespace castellan::policy
