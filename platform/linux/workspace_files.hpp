#pragma once

/// @file workspace_files.hpp
/// What a client does to a workspace's files from the host while a sandbox
/// uses it: stat, list a directory, remove, make a directory (uploads and
/// downloads are in workspace_transfer.hpp). The caller holds a directory
/// fd of the workspace's root; every path is resolved beneath it by the
/// kernel (workspace_path.hpp) and every step after that works on fds:
/// the sandboxed code may change the tree between two calls, or during
/// one, and what it changes can at worst make the operation fail, never
/// make it reach outside the workspace.
///
/// Failures carry an errno; files_error_code() gives the API's name for it.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/linux/workspace_path.hpp"
#include "platform/linux/workspace_volume.hpp"

namespace castellan::platform {

/// The errno of a special file (FIFO, socket, device) that is refused:
/// the kernel's own answer to opening a FIFO without a reader or a socket.
inline constexpr int special_file_errno = ENXIO;
/// The errno of an operation that found the tree changed under it (the
/// sandbox renamed or replaced what was being written).
inline constexpr int tree_changed_errno = ESTALE;

/// The API's error code for a failure of this module: invalid_path,
/// escapes_workspace, not_found, not_a_directory, is_a_directory,
/// not_regular, not_empty, exists, no_space, too_large, changed,
/// permission_denied, io_error.
std::string files_error_code(const failure& f);

/// What an entry is (lstat's view: a symlink is a symlink).
enum class entry_type : uint8_t { file, directory, symlink, fifo, socket, char_device,
                                  block_device, other };

/// The type of an st_mode.
entry_type type_of_mode(unsigned st_mode);

/// "file", "directory", "symlink", "fifo", "socket", "char_device",
/// "block_device", "other".
std::string to_string(entry_type t);

/// One entry, as stat and a listing give it.
struct workspace_entry {
  std::string name;  ///< the last component ("" for the root)
  entry_type type = entry_type::other;
  uint64_t size = 0;     ///< st_size
  uint32_t mode = 0;     ///< permission bits (07777)
  int64_t mtime_ns = 0;  ///< CLOCK_REALTIME
  std::string link_target; ///< a symlink's target, as stored (never followed)
};

/// The entry at `path` itself (a symlink is reported, not followed).
outcome<workspace_entry> stat_entry(int root_fd, const workspace_path& path);

/// A directory's entries, sorted by name.
struct directory_listing {
  std::vector<workspace_entry> entries;
  bool truncated = false; ///< more than max_entries: the first max_entries by readdir order
};

/// Lists the directory at `path` (symlinks inside the workspace followed to
/// reach it; its entries are stat'ed without following them).
outcome<directory_listing> list_directory(int root_fd, const workspace_path& path,
                                          std::size_t max_entries = 10000);

/// Removes the file, symlink or empty directory at `path` (a symlink
/// itself, never its target). With `recursive`, a directory and everything
/// below it, walked through directory fds opened without following
/// symlinks. The root is refused.
outcome<void> remove_entry(int root_fd, const workspace_path& path, bool recursive);

/// Makes the directory `path` (mode 0755, owned by `owner`), and with
/// `parents` the missing ones above it; an existing directory is not an
/// error with `parents` (EEXIST without). Each component is opened from
/// the one before without following symlinks.
outcome<void> make_directory(int root_fd, const workspace_path& path, bool parents,
                             const volume_owner& owner);

/// Opens the directory components of `path` from `root_fd` one by one
/// without following symlinks, making missing ones (0755, `owner`): the
/// parent of an upload with make_parents. Returns the last one (O_PATH).
outcome<unique_fd> make_directories(int root_fd, const workspace_path& path,
                                    const volume_owner& owner);

} // namespace castellan::platform
