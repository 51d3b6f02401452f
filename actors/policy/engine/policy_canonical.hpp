#pragma once

/// @file policy_canonical.hpp
/// One spelling for every way of writing the same policy, so that two
/// policies that say the same thing can be recognised as the same (the
/// supervisor keys its per-policy pools by a digest of this form).

#include <string>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_document.hpp"

namespace castellan::policy {

/// `doc` (normally merged: `extends` resolved) in canonical form:
/// - keys sorted, no whitespace (`nlohmann::json::dump()`);
/// - every field that has an effective value written out: the four plugins
///   as `{"enabled", "best_effort"}`, the three defaults, `audit.enabled`;
/// - permissions as the sorted names of their bits (`write_dir` expanded),
///   port lists as sorted, merged ranges, `denySyscalls` and `audit.events`
///   sorted;
/// - what enforces nothing left out: `description`, `$schema`, the source
///   file and each rule's origin.
/// Rules and host lists keep their order: it decides which rule a decision
/// reports (`/fs/rules/3`), which the result's events show.
/// Limits stay absent when no layer sets them (the pool's own default).
nlohmann::json canonical_json(const policy_document& doc);

/// `canonical_json(doc).dump()`.
std::string canonical_text(const policy_document& doc);

} // namespace castellan::policy
