#pragma once

/// @file uid_map.hpp
/// The id maps of a worker's user namespace. The parent writes them (it is
/// the one with privilege over its own namespace); the child then becomes the
/// sandbox user. The child side is async-signal-safe: it runs between clone3
/// and execve in a copy of a multi-threaded process.

#include <sys/types.h>

#include <cstdint>
#include <string>

#include "ipc/outcome.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// Everything both sides need, computed before the clone.
struct id_map_plan {
  uint32_t inside_uid = 0;
  uint32_t inside_gid = 0;
  uint32_t outside_uid = 0;
  uint32_t outside_gid = 0;
  /// The supervisor holds CAP_SETUID/CAP_SETGID: it maps any id, leaves
  /// setgroups allowed, and the child clears its supplementary groups (which
  /// it inherited from the supervisor: kernel group ids like 0 that would
  /// otherwise still count in permission checks). Unprivileged: the kernel
  /// demands setgroups=deny and the child keeps the supervisor's groups.
  bool privileged = false;

  std::string uid_map() const; ///< "inside outside 1\n"
  std::string gid_map() const;
};

/// Resolves `automatic`, refuses host root and ids the supervisor cannot map.
outcome<id_map_plan> plan_id_maps(const id_mapping& ids);

/// Parent side: writes /proc/<pid>/{setgroups,uid_map,gid_map}.
outcome<void> write_id_maps(pid_t pid, const id_map_plan& plan);

/// Which call of `become_sandbox_ids` failed.
enum class id_step : uint8_t { none, setgroups, setresgid, setresuid };

/// Child side, after the maps are written: clears supplementary groups (when
/// privileged), then setresgid and setresuid to the inside ids, by raw system
/// calls (glibc's set*id would signal threads that do not exist in the
/// child). Returns 0 or an errno, and the failing step in `step`.
int become_sandbox_ids(const id_map_plan& plan, id_step& step) noexcept;

} // namespace castellan::platform
