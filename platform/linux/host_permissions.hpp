#pragma once

/// @file host_permissions.hpp
/// What the sandbox's code may do to the host files behind its binds, by
/// their owner and mode. Landlock and the policy only take rights away: a
/// bind the policy makes writable is still a host directory whose owner and
/// mode bits the kernel checks against the host ids the sandbox's one user
/// maps to (uid_map.hpp: 65534 under a root supervisor, else the
/// supervisor's own). `policy explain` and `policy check` use this to say
/// when the host refuses what the policy allows.
///
/// Mode bits only: a file with a POSIX ACL is reported as "cannot tell"
/// (nullopt), and so is one this process cannot stat.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/linux/root_builder.hpp"

namespace castellan::platform {

/// The host ids the sandbox's code acts with.
struct sandbox_host_ids {
  uint32_t uid = 0;
  uint32_t gid = 0;
  /// Supplementary groups: none when the supervisor maps ids with
  /// CAP_SETUID/CAP_SETGID (the worker clears them), else the supervisor's.
  std::vector<gid_t> groups;
};

/// The ids a worker started by this process with the default id mapping
/// gets on the host.
outcome<sandbox_host_ids> default_sandbox_host_ids();

/// Why code running as `ids` in a sandbox built from `root` cannot do
/// `access` (landlock_fs bits) on `path` (inside the sandbox, normalised,
/// symlinks of the root followed) because of the host file's owner and mode:
/// e.g. "host uid 65534 may not write /srv/out (owner 0:0, mode 0755)".
/// Only for paths inside a bind of a host path; nullopt when the host
/// allows it, when the path is elsewhere, or when it cannot tell (a missing
/// file, an ACL, a stat this process may not do).
std::optional<std::string> host_refusal(const root_spec& root, const sandbox_host_ids& ids,
                                        std::string_view path, uint64_t access);

/// One message per writable bind of `root` whose top directory `ids` may not
/// create files in (write and search permission), e.g. for `policy check`.
std::vector<std::string> unwritable_binds(const root_spec& root, const sandbox_host_ids& ids);

} // namespace castellan::platform
