#pragma once

/// @file pool_policy.hpp
/// What a policy makes of a pool: the one place where a policy document or
/// snapshot becomes a pool's sandbox, limits, egress and mediation. The
/// supervisor (its pools, their reloads, request policies), spawn_pool, the
/// CLI, the embedded API and the bench programs all go through it. CAF-free.

#include <memory>
#include <string>

#include "ipc/outcome.hpp"

namespace castellan {

namespace policy {
struct policy_document;
class compiled_policy;
} // namespace policy

struct pool_config;

/// Maps a loaded policy onto a pool: plugins → layers (namespaces=false →
/// isolation none; best_effort for Landlock), fs allow rules on paths outside
/// the default root → extra binds with those Landlock rights, exec allow
/// rules → EXECUTE only there (plus `cfg.python`), antiEscape.denySyscalls →
/// seccomp, limits → cgroup limits, the default timeout and the
/// output/code limits (the ring grows to fit the code limit); a policy that
/// allows network (allows_network) → `cfg.egress_policy`.
outcome<void> apply_policy(const policy::policy_document& doc, pool_config& cfg);

/// The same for a policy compiled already (a policy actor's snapshot): every
/// part of the pool that decides with the policy shares `compiled`. The
/// pool's policy_name stays the caller's.
outcome<void> apply_policy(const std::shared_ptr<const policy::compiled_policy>& compiled,
                           pool_config& cfg);

/// `base` with `policy` applied over it (apply_policy), named after the policy
/// (`policy_name`); `base` as given when `policy` is null. A pool that follows
/// a policy is always this of its base config: at spawn and at each reload.
outcome<pool_config> pool_config_under(const pool_config& base,
                                       const std::shared_ptr<const policy::compiled_policy>& policy);

/// `pool` without what its policy added: binds, masks, execution grants,
/// denied and decided calls, egress, the policy itself, its name and the
/// pool's; its layers, limits, interpreter, mode and workers kept. What a
/// request policy's pool starts from, so that it runs under that policy alone.
pool_config pool_without_policy(const pool_config& pool);

/// Lets the sandbox of `cfg` execute `program` whatever its exec rules deny
/// (`castellan run`: the program asked for): `program` itself when it is a
/// path, else the places a bare name is looked up in. Nothing to do when
/// execution is not restricted.
void allow_program_to_run(pool_config& cfg, const std::string& program);

} // namespace castellan
