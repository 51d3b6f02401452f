#pragma once

/// @file workspace_volume.hpp
/// A workspace's size-limited file system: an image file formatted ext4
/// (mke2fs, Debian's e2fsprogs), attached to a loop device and mounted
/// nosuid, nodev, noexec and nosymfollow on a host directory: the daemon
/// runs as root over files that code in a sandbox wrote, so on the host no
/// program there runs, no device node opens and no symlink is followed. The kernel enforces the size: a write
/// beyond it fails with ENOSPC in that file system and nowhere else.
/// Every path is reached through directory fds opened without following
/// symlinks, and the mount itself goes through the new mount API onto such
/// an fd. Mounting needs CAP_SYS_ADMIN in the initial user namespace.

#include <cstdint>
#include <string>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// Who owns the root directory of a new volume (host ids: the ids a
/// sandbox's user maps to, so that code in the sandbox can write there).
struct volume_owner {
  uint32_t uid = 0;
  uint32_t gid = 0;
};

/// The mke2fs this host has ("/usr/sbin/mke2fs" or "/sbin/mke2fs"), or a
/// failure naming the package that provides it.
outcome<std::string> find_mke2fs();

/// Formats the file of `image_fd` (a regular file of the volume's size,
/// opened read-write) as ext4 whose root directory belongs to `owner`: no
/// reserved blocks (the sandbox's user is never the one they are kept for),
/// errors remount it read-only. mke2fs sees the file as /proc/self/fd/3, so
/// no path can lead it elsewhere. `what` names the image in errors.
outcome<void> format_volume(int image_fd, const volume_owner& owner, const std::string& what);

/// How the directory of a mount point stands.
enum class mount_point_state : uint8_t {
  empty,      ///< nothing is mounted there
  this_image, ///< the file system of the image is mounted there
  other,      ///< something else is (not ours, or a device now backed by another file)
};

/// Looks at the directory `name` of `parent_fd` (not following a symlink)
/// and at what is mounted on it.
outcome<mount_point_state> probe_mount_point(int parent_fd, const std::string& name,
                                            int image_fd);

/// The root of the file system of `image_fd` mounted on the directory
/// `name` of `parent_fd`, opened O_PATH without following a symlink and
/// checked to be this image's mount (the root of a mount, ext4, from a loop
/// device backed by the image); an error when anything else is there.
outcome<unique_fd> open_volume_root(int parent_fd, const std::string& name, int image_fd);

/// Mounts the ext4 file system of `image_fd` on the directory `name` of
/// `parent_fd` (nosuid, nodev, noexec, nosymfollow): through a loop device already backed by the
/// image when there is one (a process that died left it attached; two
/// devices over one file would be two file systems writing one image), else
/// through a new one (auto-clearing: detached once the mount is gone).
outcome<void> mount_volume(int image_fd, int parent_fd, const std::string& name,
                           const std::string& what);

/// Unmounts what is mounted on the directory `name` of `parent_fd`; lazily
/// (MNT_DETACH) when it is busy. No error when nothing is mounted there.
outcome<void> unmount_volume(int parent_fd, const std::string& name);

/// Space of a mounted volume, from statfs.
struct volume_usage {
  uint64_t size_bytes = 0; ///< blocks of the file system (the image less its metadata)
  uint64_t used_bytes = 0; ///< blocks in use (files, directories, the journal)
  uint64_t free_bytes = 0; ///< what writes can still take
  uint64_t files = 0;      ///< inodes in use
};

/// The usage of the volume mounted on the directory `name` of `parent_fd`.
outcome<volume_usage> usage_of(int parent_fd, const std::string& name);

} // namespace castellan::platform
