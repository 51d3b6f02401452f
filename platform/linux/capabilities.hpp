#pragma once

/// @file capabilities.hpp
/// Capability sets and securebits, through capget/capset/prctl directly
/// (no libcap).

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// What `drop_capabilities` left in force (all zero on success).
struct capabilities_report {
  uint64_t effective = 0;
  uint64_t permitted = 0;
  uint64_t inheritable = 0;
  uint64_t ambient = 0;
  uint64_t bounding = 0;
  unsigned securebits = 0; ///< PR_GET_SECUREBITS after the drop
  int last_cap = 0;        ///< the highest capability this kernel knows
};

/// Drops every capability for good: locks the securebits (NOROOT,
/// NO_SETUID_FIXUP, NO_CAP_AMBIENT_RAISE, each with its lock, and
/// KEEP_CAPS_LOCKED), empties the bounding set, the ambient set, and the
/// effective/permitted/inheritable sets. Needs CAP_SETPCAP the first time;
/// calling it again once everything is gone succeeds without it. Verifies the
/// result with capget and reports it.
outcome<capabilities_report> drop_capabilities();

/// Reads the current sets (any process: /proc is not needed).
outcome<capabilities_report> current_capabilities();

/// The capabilities castellan-worker keeps (as ambient capabilities inside
/// its own user namespace) to build its sandbox: CAP_SYS_ADMIN (mounts,
/// pivot_root, sethostname), CAP_SETPCAP (to drop the rest) and CAP_NET_ADMIN
/// (loopback up), and CAP_DAC_OVERRIDE, for overlay mounts only (below).
uint64_t setup_capability_mask() noexcept;

/// What an overlay mount needs beyond CAP_SYS_ADMIN: the kernel makes the
/// overlay's work directory mode 0 and then works in it with the mounter's
/// credentials, which only CAP_DAC_OVERRIDE lets through. castellan-worker
/// keeps it permitted but not effective during its setup and raises it
/// around each overlay mount only (root_builder.cpp), so no other setup
/// step (a bind source captured by path, above all) gets past a permission.
uint64_t overlay_capability_mask() noexcept;

/// Raises (`on`) or lowers `mask` in the effective set; `was_on` (when not
/// null) says whether all of it was effective before. Raising needs it
/// permitted (EPERM otherwise). Returns 0 or an errno.
int set_effective_capabilities(uint64_t mask, bool on, bool* was_on = nullptr) noexcept;

/// Child side, async-signal-safe: makes `mask` inheritable and ambient so
/// that it survives execve of a binary without file capabilities. The other
/// capabilities are lost at exec. Returns 0 or an errno.
int keep_ambient_capabilities(uint64_t mask) noexcept;

/// "CAP_SYS_ADMIN,CAP_NET_ADMIN" (numbers for ones this build does not name).
std::string capability_names(uint64_t mask);

} // namespace castellan::platform
