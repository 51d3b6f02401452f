#pragma once

/// @file workspace_store.hpp
/// Persistent named workspaces, each a directory with a size quota the
/// kernel enforces, for sandboxes to bind writable at /workspace.
///
/// A store is any directory its owner chooses (`castellan serve` uses
/// `<state_dir>/workspaces`), laid out as
///
///     <dir>/.lock              flock: one process owns the store at a time
///     <dir>/images/<name>.ext4 the workspace: a sparse file of the quota's size, ext4
///     <dir>/mounts/<name>/     where it is mounted while a lease is open (loop
///                              device; nosuid, nodev, noexec, nosymfollow)
///
/// all created 0700 (images 0600) and reached through directory fds opened
/// without following symlinks. The root directory of a workspace's file
/// system belongs to the host ids the sandbox's user maps to
/// (store_options::owner; platform/linux/uid_map.hpp), so code in the
/// sandbox writes there as the owner and the daemon reads the files on the
/// host. A workspace is mounted while a lease on it is open, and unmounted
/// when the last one goes: mounts do not pile up. Opening a store adopts the mounts a previous process left (killed
/// without unmounting) and unmounts the ones that are not its images'.
///
/// Needs CAP_SYS_ADMIN in the initial user namespace (loop devices, ext4
/// mounts); open() says so when the process lacks it. Thread-safe.
///
/// Failures carry an errno that says what kind they are (the supervisor
/// turns them into castellan_errc values): EINVAL a bad name or quota,
/// ENOENT no such workspace, EEXIST a name taken, EBUSY a workspace in use,
/// EDQUOT a cap of the store (max_workspaces, max_total_quota_bytes) and
/// ENOSPC a host disk without room for the image.

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/session/workspace_messages.hpp"
#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/workspace_volume.hpp"

namespace castellan {

/// How a store is opened.
struct workspace_store_options {
  std::string directory; ///< created (0700) when missing; its parent must exist
  /// Host ids that own each new workspace's root directory: those the
  /// sandbox's user maps to (sandbox_owner()).
  platform::volume_owner owner;
  /// At most this many workspaces in the store (0: no cap).
  uint32_t max_workspaces = 0;
  /// The quotas of all workspaces together at most this (0: no cap). Each
  /// image is allocated whole at create, so this bounds the store's disk.
  uint64_t max_total_quota_bytes = 0;
};

/// Success when this process may run a store (CAP_SYS_ADMIN in the initial
/// user namespace); else a failure that says what is needed.
outcome<void> workspace_privileges();

/// The host ids a sandbox started by this process with the default id
/// mapping runs as (65534:65534 when the process is root): the owner that
/// lets its code write a workspace.
outcome<platform::volume_owner> sandbox_owner();

class workspace_store;

/// One use of an open workspace: while it lives, the workspace stays
/// mounted and remove() refuses it. Move-only.
class workspace_lease {
public:
  workspace_lease() = default;
  workspace_lease(workspace_lease&& other) noexcept;
  workspace_lease& operator=(workspace_lease&& other) noexcept;
  workspace_lease(const workspace_lease&) = delete;
  workspace_lease& operator=(const workspace_lease&) = delete;
  ~workspace_lease();

  const std::string& name() const noexcept { return name_; }
  /// The mounted directory on the host, without symlinks (for messages, and
  /// for code that reads the files on the host).
  const std::string& host_path() const noexcept { return host_path_; }
  /// The root of the mounted file system, opened (O_PATH) and checked to be
  /// this workspace's mount when the lease was taken: what a sandbox binds
  /// (sandbox_profile::workspace_root), with no path resolved again. Null
  /// for an empty lease.
  const std::shared_ptr<const unique_fd>& root() const noexcept { return root_; }
  explicit operator bool() const noexcept { return store_ != nullptr; }

  /// Gives the use back now (the destructor does otherwise).
  void release() noexcept;

private:
  friend class workspace_store;
  workspace_lease(std::shared_ptr<workspace_store> store, std::string name, std::string path,
                  std::shared_ptr<const unique_fd> root)
      : store_(std::move(store)), name_(std::move(name)), host_path_(std::move(path)),
        root_(std::move(root)) {}

  std::shared_ptr<workspace_store> store_;
  std::string name_;
  std::string host_path_;
  std::shared_ptr<const unique_fd> root_;
};

class workspace_store : public std::enable_shared_from_this<workspace_store> {
public:
  /// The smallest and largest quota create() accepts.
  static constexpr uint64_t min_quota_bytes = 4ull << 20;
  static constexpr uint64_t max_quota_bytes = 16ull << 40;

  /// Opens (creating it when missing) the store at `options.directory`,
  /// takes its lock, and recovers what a previous process left.
  static outcome<std::shared_ptr<workspace_store>> open(const workspace_store_options& options);

  /// Unmounts every workspace this store mounted or adopted.
  ~workspace_store();
  workspace_store(const workspace_store&) = delete;
  workspace_store& operator=(const workspace_store&) = delete;

  /// Creates the workspace `name` with `quota_bytes` of space (rounded down
  /// to 4 KiB): its image is allocated whole on the host's disk now
  /// (fallocate), so a workspace never fills the disk later. Refuses an
  /// existing name, a store at one of its caps, and a disk without room
  /// (the message names the store, the bytes free and the quota).
  outcome<void> create(const std::string& name, uint64_t quota_bytes);

  /// Mounts the workspace when it is not (concurrent leases share one
  /// mount) and returns a lease on it; the last lease to go unmounts it.
  outcome<workspace_lease> open_workspace(const std::string& name);

  /// Every workspace, by name.
  outcome<std::vector<workspace_info>> list();

  /// Unmounts and deletes the workspace and its files; refused while a
  /// lease on it is open.
  outcome<void> remove(const std::string& name);

  /// The store's directory, without symlinks.
  const std::string& directory() const noexcept { return path_; }

private:
  struct entry {
    bool mounted = false;
    uint32_t users = 0;
  };

  workspace_store() = default;
  friend class workspace_lease;
  void release(const std::string& name) noexcept;
  outcome<void> recover();
  outcome<unique_fd> open_image(const std::string& name);
  /// Each workspace's quota (its image's size), by name; the mutex held.
  outcome<std::map<std::string, uint64_t>> image_sizes();
  std::string host_path(const std::string& name) const;

  std::mutex mutex_;
  std::string path_;
  platform::volume_owner owner_;
  uint32_t max_workspaces_ = 0;
  uint64_t max_total_quota_bytes_ = 0;
  unique_fd dir_;
  unique_fd lock_;
  unique_fd images_;
  unique_fd mounts_;
  std::map<std::string, entry> states_;
};

} // namespace castellan
