#pragma once

/// @file policy_actor.hpp
/// The policy actor's typed interface and its spawn helper.
///
/// The actor owns a directory of policies (engine/policy_directory.hpp): it
/// loads each one (validated, `extends` resolved, merged), compiles it into an
/// immutable snapshot and serves snapshots by name. With `watch`, a watcher
/// thread (directory_watcher.hpp) reports file changes and the actor reloads:
/// an accepted change replaces the snapshot and is announced with
/// `policy_updated`; a refused one keeps the previous snapshot and is
/// announced with `policy_rejected`. Holders of an old snapshot keep using it
/// until they take the new one; nothing is mutated in place.
///
/// A pool asks once (`policy_get_atom`, name) for its snapshot, subscribes,
/// and swaps in the snapshot of each `policy_updated` for its name. Checks
/// can also be asked as messages (worker hooks, the proxy), answered with a
/// `policy_decision` naming the deciding rule.

#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"

namespace castellan {

using policy_actor = caf::typed_actor<
    // the current snapshot of a named policy (error no_such_policy otherwise)
    caf::replies_to<policy_get_atom, std::string>::with<policy_snapshot>,
    // the names of the loaded policies, sorted
    caf::replies_to<policy_list_atom>::with<std::vector<std::string>>,
    // adds or replaces a policy from JSON text (name, text); `extends` names
    // resolve in the policy directory. Error policy_invalid with every error.
    caf::replies_to<policy_put_atom, std::string, std::string>::with<policy_snapshot>,
    // checks against a named policy
    caf::replies_to<fs_check>::with<policy_decision>,
    caf::replies_to<net_check>::with<policy_decision>,
    caf::replies_to<exec_check>::with<policy_decision>,
    // subscribers receive policy_updated and policy_rejected (plain actors)
    caf::reacts_to<subscribe_atom, caf::actor>, caf::reacts_to<unsubscribe_atom, caf::actor>,
    // rescans the directory now (e.g. after a change the watcher cannot see,
    // such as an extended file outside the directory)
    caf::replies_to<policy_reload_atom>::with<policy_status>,
    caf::replies_to<status_atom>::with<policy_status>,
    // from the watcher thread (internal)
    caf::reacts_to<policy_file_event>>;

/// How to run the policy actor.
struct policy_config {
  std::string directory; ///< the policy directory (e.g. "policies", or share/castellan/policies)
  bool watch = true;     ///< hot reload with inotify
};

/// Loads every policy of `cfg.directory` and spawns the policy actor. Fails
/// if the directory cannot be read or (with `watch`) watched; policies that
/// are invalid do not fail the spawn: they are listed in the status as
/// rejected (and reported to subscribers when they change).
caf::expected<policy_actor> spawn_policy(caf::actor_system& sys, policy_config cfg);

} // namespace castellan
