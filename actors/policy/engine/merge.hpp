#pragma once

/// @file merge.hpp
/// Merging a stack of policies into one (what `extends` and `policy merge` do).
///
/// Layers are given bottom first; the last is the top (the file that extends
/// the others). The result never grants what no layer grants and keeps every
/// restriction of every layer:
/// - plugins: enabled if any layer enables it (OR); best_effort only if every
///   layer that mentions the plugin allows it (AND);
/// - defaults: the most restrictive per domain (deny > warn > allow);
/// - fs, net and exec rules: concatenated in layer order, never deduplicated;
/// - net.hosts.deny: union; net.hosts.allow: present if any layer has one,
///   then the union of all layers' allow lists (a host named by no layer stays
///   denied; denials of every layer still win);
/// - antiEscape.denySyscalls and audit.events: union, in first-seen order;
/// - audit.enabled: OR;
/// - limits: the minimum of each limit any layer sets;
/// - description: the top-most non-empty one; source: the top layer's.

#include <vector>

#include "actors/policy/engine/policy_document.hpp"

namespace castellan::policy {

/// Merges `layers` (bottom first). An empty list gives an empty policy.
policy_document merge_policies(const std::vector<policy_document>& layers);

} // namespace castellan::policy
