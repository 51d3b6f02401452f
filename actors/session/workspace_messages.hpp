#pragma once

/// @file workspace_messages.hpp
/// What the supervisor answers about workspaces (workspace_store.hpp):
/// plain structs with `inspect()`, so they cross nodes.

#include <cstdint>
#include <string>

#include <caf/meta/type_name.hpp>

namespace castellan {

/// A workspace as the store lists it.
struct workspace_info {
  std::string name;
  uint64_t quota_bytes = 0; ///< the image's size, set at create
  /// What the image takes on the host's disk: the whole quota, allocated
  /// at create (fallocate), and nothing more.
  uint64_t image_bytes = 0;
  bool mounted = false;
  /// From statfs of the mounted file system (0 when not mounted): blocks in
  /// use, the file system's own metadata and journal included.
  uint64_t used_bytes = 0;
  uint64_t free_bytes = 0; ///< what writes can still take (0 when not mounted)
  uint32_t users = 0;      ///< leases open now (a session holds one)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, workspace_info& x) {
  return f(caf::meta::type_name("workspace_info"), x.name, x.quota_bytes, x.image_bytes,
           x.mounted, x.used_bytes, x.free_bytes, x.users);
}

} // namespace castellan
