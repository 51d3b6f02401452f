#pragma once

/// @file workspace_config.hpp
/// The supervisor's workspace store (supervisor_config::workspaces): where
/// it is, its caps, and what quota a client gets and may ask for.

#include <cstdint>

#include "actors/session/workspace_store.hpp"

namespace castellan {

struct workspace_config {
  /// The store's directory and caps (max_workspaces,
  /// max_total_quota_bytes). An owner of 0:0 stands for sandbox_owner():
  /// a workspace root that only root may write is of no use to a sandbox.
  workspace_store_options store;
  /// The quota of a workspace created with a quota of 0.
  uint64_t default_quota_bytes = 256ull << 20;
  /// The largest quota a client may ask for (more is `invalid_request`).
  uint64_t max_quota_bytes = 4ull << 30;
};

} // namespace castellan
