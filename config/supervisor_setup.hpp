#pragma once

/// @file supervisor_setup.hpp
/// From a loaded config to the actor tree's configuration.

#include "actors/supervisor/supervisor_actor.hpp"
#include "config/serve_config.hpp"
#include "ipc/outcome.hpp"

namespace castellan::config {

/// The supervisor_config a checked `cfg` describes: its pools in order (the
/// first the default route), each on pool_spec's defaults where the file set
/// nothing; a pool that names a policy of the directory follows it through
/// the policy actor (`named_policy`), a pool with a policy file runs that
/// file as read now; the policy directory with its watch setting; the audit,
/// egress, request-policy and session settings, and the workspace store at
/// `<state_dir>/workspaces` when `[workspaces]` is enabled (serve drops it
/// without root). Fails when a policy file no longer
/// loads.
outcome<supervisor_config> to_supervisor_config(const serve_config& cfg);

} // namespace castellan::config
