#pragma once

/// @file mounts.hpp
/// Mount primitives for building a worker's root, each one system call (or a
/// short fixed sequence) that succeeds or names the path and the errno. The
/// pipeline that uses them is root_builder.hpp.

#include <cstdint>
#include <string>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// A copy of a mount tree that is attached nowhere (open_tree with
/// OPEN_TREE_CLONE | AT_RECURSIVE). It keeps what it shows even after its
/// source is covered or unmounted, until attached with `attach_tree`.
struct detached_tree {
  unique_fd fd;
  bool is_dir = false;
  std::string source;
};

/// mount(NULL, "/", NULL, MS_REC | MS_PRIVATE): nothing done in this mount
/// namespace propagates back to the host.
outcome<void> make_mounts_private();

/// Captures `source` (symlinks in it followed) as a detached tree.
outcome<detached_tree> clone_tree(const std::string& source);

/// Captures `source` as a detached tree without following any symlink on
/// the way (openat2 RESOLVE_NO_SYMLINKS): for a path that code in a sandbox
/// may have been able to change (a policy's own bind, which an earlier
/// worker may have been allowed to write), where a planted symlink would
/// bind whatever it points at. ELOOP names the refusal.
outcome<detached_tree> clone_tree_no_symlinks(const std::string& source);

/// Captures the directory of `fd` (an O_PATH fd the caller opened and
/// checked) as a detached tree: no path is resolved, so nothing renamed,
/// unmounted or replaced by a symlink since the check changes what is
/// captured. `source` names it in errors.
outcome<detached_tree> clone_tree_of(int fd, const std::string& source);

/// Takes ownership of `fd`, a detached tree another process captured with
/// clone_tree and passed on (the spawner captures what the worker's user
/// cannot reach). Refuses an fd that is not the root of a detached tree.
outcome<detached_tree> adopt_tree(int fd, const std::string& source);

/// mount_setattr on a detached or attached tree: sets and clears MOUNT_ATTR_*
/// bits, on every mount of the tree when `recursive`.
outcome<void> set_tree_attributes(int tree_fd, uint64_t set, uint64_t clear, bool recursive,
                                  const std::string& what);

/// Attaches `tree` on `target` (an existing directory or file: the mount point).
outcome<void> attach_tree(const detached_tree& tree, const std::string& target);

/// A tmpfs of at most `size_bytes` (0: the kernel default, half of RAM) with
/// root directory mode `mode`; always nosuid and nodev, noexec unless `exec`.
outcome<void> mount_tmpfs(const std::string& target, uint64_t size_bytes, unsigned mode,
                          bool exec, const std::string& name = "tmpfs");

/// A fresh procfs at `target`, nosuid/nodev/noexec, trying the option sets in
/// order of strength (hidepid=invisible and subset=pid first) and returning
/// the one in force ("" = no options). `hide_pids`/`subset_pid` false skip
/// those options.
/// Mounts an overlay at `target` (nosuid, nodev; noexec unless `exec`)
/// whose one lower layer is `lower` (which may be `target` itself: the
/// overlay then covers what it shows) and whose writes go to `upper`, with
/// `work` its work directory on the same file system. In a user namespace
/// the overlay keeps its metadata in user.* extended attributes
/// (`userxattr`), which the upper file system must support (tmpfs: 6.6).
outcome<void> mount_overlay(const std::string& lower, const std::string& upper,
                            const std::string& work, const std::string& target, bool exec);

outcome<std::string> mount_proc(const std::string& target, bool hide_pids, bool subset_pid);

/// Makes the mount at `target` read-only (that mount only, not the ones on it).
outcome<void> remount_read_only(const std::string& target);

/// Makes `new_root` (a mount point) the root: chdir, pivot_root(".", "."),
/// then detaches the old root stacked on it, and chdir("/").
outcome<void> pivot_to(const std::string& new_root);

/// What `mask_path` did with one path.
enum class mask_outcome { masked_directory, masked_file, missing };

/// Hides `path` (absolute, as seen inside `root`) behind an inaccessible
/// mount: a directory gets an empty, read-only tmpfs of mode 000 on top; any
/// other file gets a read-only bind of `empty_file` (mode 000). Without
/// CAP_DAC_OVERRIDE nothing under it can be read, listed or executed, and no
/// process without CAP_SYS_ADMIN can remove the cover. `path` is resolved
/// with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from `root`, so a
/// symlink inside the root can never redirect the cover outside it; the
/// mount goes onto the resolved fd, not onto a path looked up again.
outcome<mask_outcome> mask_path(const std::string& root, const std::string& path,
                                const std::string& empty_file);

/// mkdir -p inside `base` for `relative` (components created 0755; never
/// follows a symlink).
outcome<void> make_directories(const std::string& base, const std::string& relative);

} // namespace castellan::platform
