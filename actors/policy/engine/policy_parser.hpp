#pragma once

/// @file policy_parser.hpp
/// From untrusted text to a checked policy_document: JSON syntax, the schema,
/// then what the schema cannot say (paths and globs, CIDRs, port lists, host
/// patterns, sha256 digests, syscall names, duplicates). Reports every error
/// it finds; never throws. `extends` is kept, not resolved (see policy_loader).

#include <string_view>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_document.hpp"
#include "actors/policy/engine/policy_error.hpp"

namespace castellan::policy {

/// Parses and checks policy text; `file` names it in errors and rule origins.
validated<policy_document> parse_policy(std::string_view text, std::string_view file);

/// Checks an already-parsed JSON document.
validated<policy_document> parse_policy_json(const nlohmann::json& doc, std::string_view file);

/// True when an `extends` entry is a path (contains '/' or ends in ".json")
/// rather than the name of a policy in the policy directory.
bool is_extends_path(std::string_view entry) noexcept;

} // namespace castellan::policy
