#pragma once

/// @file mount_table.hpp
/// This process's mount table, as /proc/self/mountinfo shows it: which
/// mounts sit at or below a directory (what a process that died without
/// unmounting left behind).

#include <sys/types.h>

#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// One line of /proc/self/mountinfo.
struct mount_entry_info {
  unsigned id = 0;
  unsigned parent_id = 0;
  dev_t device = 0;        ///< the st_dev of files on it (major:minor)
  std::string root;        ///< the mounted directory of its file system
  std::string mount_point; ///< absolute, octal escapes (\040 …) decoded
  std::string fs_type;
  std::string source;
};

/// Parses mountinfo text (see proc(5)); a line it cannot parse is an error.
outcome<std::vector<mount_entry_info>> parse_mountinfo(const std::string& text);

/// The mounts of this process's mount namespace whose mount point is `dir`
/// itself or lies below it (`dir` absolute, without symlinks), in mount
/// order (a mount on top of another comes after it).
outcome<std::vector<mount_entry_info>> mounts_at_or_below(const std::string& dir);

} // namespace castellan::platform
