#include "actors/session/workspace_store.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <set>

#include "actors/session/workspace_name.hpp"
#include "platform/linux/host_permissions.hpp"
#include "platform/linux/mount_table.hpp"
#include "platform/linux/mounts.hpp"

namespace castellan {

namespace {

constexpr const char* image_suffix = ".ext4";
constexpr const char* new_suffix = ".ext4.new";
constexpr uint64_t quota_granule = 4096;
/// The inode number of the initial user namespace (PROC_USER_INIT_INO).
constexpr const char* initial_user_ns = "user:[4026531837]";
const std::string privilege_hint =
  "workspaces need CAP_SYS_ADMIN in the initial user namespace (loop devices and ext4 mounts): "
  "run the supervisor as root, outside any user namespace";

bool has_sys_admin() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0)
    return false;
  return (data[CAP_SYS_ADMIN / 32].effective & (1u << (CAP_SYS_ADMIN % 32))) != 0;
}

outcome<void> check_privileges_now() {
  if (!has_sys_admin())
    return logic_failure("this process lacks CAP_SYS_ADMIN; " + privilege_hint);
  char link[64] = {};
  const ssize_t n = ::readlink("/proc/self/ns/user", link, sizeof link - 1);
  if (n < 0)
    return errno_failure("readlink /proc/self/ns/user");
  if (std::string(link, static_cast<std::size_t>(n)) != initial_user_ns)
    return logic_failure("this process runs in a user namespace of its own (" +
                         std::string(link, static_cast<std::size_t>(n)) + "); " + privilege_hint);
  return {};
}

/// `path` of an fd, as the kernel names it (symlinks resolved).
outcome<std::string> fd_path(int fd) {
  char buf[4096];
  const std::string self = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(self.c_str(), buf, sizeof buf - 1);
  if (n < 0)
    return errno_failure("readlink " + self);
  return std::string(buf, static_cast<std::size_t>(n));
}

/// The subdirectory `name` of `parent`, created 0700 when missing, opened
/// without following a symlink; refused unless it is ours and closed to others.
outcome<unique_fd> private_subdir(int parent, const std::string& name) {
  if (::mkdirat(parent, name.c_str(), 0700) != 0 && errno != EEXIST)
    return errno_failure("mkdir " + name);
  unique_fd fd(::openat(parent, name.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
  if (!fd)
    return errno_failure("open " + name + " (no symlink followed)");
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return errno_failure("fstat " + name);
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return logic_failure(name + " belongs to uid " + std::to_string(st.st_uid) + " with mode " +
                         std::to_string(st.st_mode & 07777) +
                         ": it must be this process's and writable by no one else");
  return fd;
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// The names in the directory `dir_fd`.
outcome<std::vector<std::string>> entries_of(int dir_fd) {
  int fd = ::openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    return errno_failure("open .");
  DIR* dir = ::fdopendir(fd);
  if (dir == nullptr) {
    const int err = errno;
    ::close(fd);
    return errno_failure("fdopendir", err);
  }
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(dir)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..")
      out.push_back(n);
  }
  ::closedir(dir);
  return out;
}

std::string quoted(const std::string& name) {
  return "workspace '" + name + "'";
}

/// `f` with the errno that classifies it (see workspace_store.hpp).
failure kind(int code, failure f) {
  f.code = code;
  return f;
}

/// A name refused by validate_workspace_name, classified EINVAL.
outcome<void> checked_name(const std::string& name) {
  if (auto ok = validate_workspace_name(name); !ok)
    return kind(EINVAL, ok.error());
  return {};
}

} // namespace

outcome<void> workspace_privileges() {
  return check_privileges_now();
}

outcome<platform::volume_owner> sandbox_owner() {
  auto ids = platform::default_sandbox_host_ids();
  if (!ids)
    return ids.error();
  return platform::volume_owner{ids->uid, ids->gid};
}

// -- workspace_lease ----------------------------------------------------------

workspace_lease::workspace_lease(workspace_lease&& other) noexcept
    : store_(std::move(other.store_)), name_(std::move(other.name_)),
      host_path_(std::move(other.host_path_)), root_(std::move(other.root_)) {
  other.store_.reset();
}

workspace_lease& workspace_lease::operator=(workspace_lease&& other) noexcept {
  if (this != &other) {
    release();
    store_ = std::move(other.store_);
    other.store_.reset();
    name_ = std::move(other.name_);
    host_path_ = std::move(other.host_path_);
    root_ = std::move(other.root_);
  }
  return *this;
}

workspace_lease::~workspace_lease() {
  release();
}

void workspace_lease::release() noexcept {
  root_.reset(); // a sandbox that binds it keeps its own copy
  if (store_) {
    store_->release(name_);
    store_.reset();
  }
}

// -- workspace_store ----------------------------------------------------------

outcome<std::shared_ptr<workspace_store>>
workspace_store::open(const workspace_store_options& options) {
  const std::string& dir = options.directory;
  if (dir.empty() || dir.front() != '/')
    return logic_failure("workspace store: the directory '" + dir + "' is not absolute");
  if (auto ok = check_privileges_now(); !ok)
    return ok.error().wrap("workspace store " + dir);
  std::shared_ptr<workspace_store> store(new workspace_store());
  store->owner_ = options.owner;
  store->max_workspaces_ = options.max_workspaces;
  store->max_total_quota_bytes_ = options.max_total_quota_bytes;
  if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST)
    return errno_failure("workspace store: mkdir " + dir);
  // The operator's path may pass through symlinks (/var/run); below it,
  // nothing is followed.
  store->dir_.reset(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!store->dir_)
    return errno_failure("workspace store: open " + dir);
  struct stat st;
  if (::fstat(store->dir_.get(), &st) != 0)
    return errno_failure("workspace store: fstat " + dir);
  if (st.st_uid != ::geteuid() || (st.st_mode & 022) != 0)
    return logic_failure("workspace store: " + dir + " belongs to uid " +
                         std::to_string(st.st_uid) + " with mode " +
                         std::to_string(st.st_mode & 07777) +
                         ": it must be this process's and writable by no one else");
  auto path = fd_path(store->dir_.get());
  if (!path)
    return path.error().wrap("workspace store");
  store->path_ = *path;
  store->lock_.reset(
    ::openat(store->dir_.get(), ".lock", O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!store->lock_)
    return errno_failure("workspace store: open " + store->path_ + "/.lock");
  if (::flock(store->lock_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK)
      return logic_failure("workspace store " + store->path_ +
                           ": another process has it open (" + store->path_ + "/.lock is locked)");
    return errno_failure("workspace store: flock " + store->path_ + "/.lock");
  }
  auto images = private_subdir(store->dir_.get(), "images");
  if (!images)
    return images.error().wrap("workspace store " + store->path_);
  store->images_ = std::move(*images);
  auto mounts = private_subdir(store->dir_.get(), "mounts");
  if (!mounts)
    return mounts.error().wrap("workspace store " + store->path_);
  store->mounts_ = std::move(*mounts);
  if (auto ok = store->recover(); !ok)
    return ok.error().wrap("workspace store " + store->path_ + ": recovery");
  return store;
}

outcome<void> workspace_store::recover() {
  // Images a create was writing when its process died.
  auto names = entries_of(images_.get());
  if (!names)
    return names.error().wrap("images");
  for (const auto& n : *names)
    if (ends_with(n, new_suffix))
      ::unlinkat(images_.get(), n.c_str(), 0);
  // Mounts a process that died left: ours are adopted (a sandbox of the
  // dead process may still write through the same file system, so it must
  // not be mounted a second time from another loop device), others go.
  const std::string base = path_ + "/mounts";
  auto mounts = platform::mounts_at_or_below(base);
  if (!mounts)
    return mounts.error();
  std::set<std::string> seen;
  for (const auto& m : *mounts) {
    if (m.mount_point == base)
      return logic_failure("something is mounted on " + base + " itself");
    const auto rest = m.mount_point.substr(base.size() + 1);
    seen.insert(rest.substr(0, rest.find('/')));
  }
  for (const auto& name : seen) {
    bool adopted = false;
    if (validate_workspace_name(name)) {
      unique_fd image(::openat(images_.get(), (name + image_suffix).c_str(),
                               O_RDWR | O_NOFOLLOW | O_CLOEXEC));
      if (image) {
        auto state = platform::probe_mount_point(mounts_.get(), name, image.get());
        if (state && *state == platform::mount_point_state::this_image) {
          // A mount of an older version may lack noexec and nosymfollow.
          auto root = platform::open_volume_root(mounts_.get(), name, image.get());
          if (root &&
              platform::set_tree_attributes(root->get(),
                                            MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                              MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSYMFOLLOW,
                                            0, false, "mounts/" + name)) {
            states_[name].mounted = true;
            adopted = true;
          }
        }
      }
    }
    if (!adopted) {
      if (auto ok = platform::unmount_volume(mounts_.get(), name); !ok)
        return ok.error().wrap("mounts/" + name);
      if (!validate_workspace_name(name))
        ::unlinkat(mounts_.get(), name.c_str(), AT_REMOVEDIR);
    }
  }
  return {};
}

workspace_store::~workspace_store() {
  std::lock_guard<std::mutex> guard(mutex_);
  for (auto& [name, s] : states_)
    if (s.mounted)
      (void)platform::unmount_volume(mounts_.get(), name);
}

std::string workspace_store::host_path(const std::string& name) const {
  return path_ + "/mounts/" + name;
}

outcome<unique_fd> workspace_store::open_image(const std::string& name) {
  unique_fd fd(::openat(images_.get(), (name + image_suffix).c_str(),
                        O_RDWR | O_NOFOLLOW | O_CLOEXEC));
  if (!fd) {
    if (errno == ENOENT)
      return kind(ENOENT, logic_failure("no " + quoted(name)));
    return errno_failure(quoted(name) + ": open images/" + name + image_suffix);
  }
  struct stat st;
  if (::fstat(fd.get(), &st) != 0)
    return errno_failure(quoted(name) + ": fstat");
  if (!S_ISREG(st.st_mode))
    return logic_failure(quoted(name) + ": images/" + name + image_suffix +
                         " is not a regular file");
  return fd;
}

outcome<void> workspace_store::create(const std::string& name, uint64_t quota_bytes) {
  if (auto ok = checked_name(name); !ok)
    return ok.error();
  const uint64_t size = quota_bytes - quota_bytes % quota_granule;
  if (size < min_quota_bytes || size > max_quota_bytes)
    return kind(EINVAL, logic_failure(quoted(name) + ": a quota of " +
                                      std::to_string(quota_bytes) + " bytes is outside " +
                                      std::to_string(min_quota_bytes) + " to " +
                                      std::to_string(max_quota_bytes)));
  std::lock_guard<std::mutex> guard(mutex_);
  const std::string final_name = name + image_suffix;
  const std::string temp_name = name + new_suffix;
  struct stat st;
  if (::fstatat(images_.get(), final_name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    return kind(EEXIST, logic_failure(quoted(name) + " already exists"));
  if (max_workspaces_ != 0 || max_total_quota_bytes_ != 0) {
    auto images = image_sizes();
    if (!images)
      return images.error().wrap(quoted(name));
    uint64_t total = 0;
    for (const auto& [n, bytes] : *images)
      total += bytes;
    if (max_workspaces_ != 0 && images->size() >= max_workspaces_)
      return kind(EDQUOT, logic_failure(quoted(name) + ": the store " + path_ + " holds " +
                                        std::to_string(images->size()) +
                                        " workspaces, its maximum"));
    if (max_total_quota_bytes_ != 0 && size > max_total_quota_bytes_ - std::min(total, max_total_quota_bytes_))
      return kind(EDQUOT,
                  logic_failure(quoted(name) + ": a quota of " + std::to_string(size) +
                                " bytes would bring the store " + path_ + " to " +
                                std::to_string(total + size) + " bytes of quotas, above its "
                                "maximum of " + std::to_string(max_total_quota_bytes_)));
  }
  // Refused before anything is written when the disk has no room (the
  // fallocate below still decides when another writer takes it meanwhile).
  struct statvfs vfs;
  if (::fstatvfs(images_.get(), &vfs) != 0)
    return errno_failure(quoted(name) + ": statvfs " + path_ + "/images");
  const uint64_t free_bytes = static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
  auto no_room = [&](uint64_t free_now) {
    return kind(ENOSPC, logic_failure(quoted(name) + ": no room for a quota of " +
                                      std::to_string(size) + " bytes: " + path_ + " has " +
                                      std::to_string(free_now) + " bytes free on the host"));
  };
  if (size > free_bytes)
    return no_room(free_bytes);
  ::unlinkat(images_.get(), temp_name.c_str(), 0); // a leftover of a failed create
  unique_fd image(::openat(images_.get(), temp_name.c_str(),
                           O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!image)
    return errno_failure(quoted(name) + ": create images/" + temp_name);
  auto fail = [&](failure f) -> outcome<void> {
    ::unlinkat(images_.get(), temp_name.c_str(), 0);
    return f;
  };
  // Allocated whole, not sparse: what the workspace may hold is on the disk
  // now, and no workspace can fill the host's disk later.
  if (const int err = ::posix_fallocate(image.get(), 0, static_cast<off_t>(size)); err != 0) {
    if (err == ENOSPC) {
      struct statvfs now;
      return fail(no_room(::fstatvfs(images_.get(), &now) == 0
                            ? static_cast<uint64_t>(now.f_bavail) * now.f_frsize
                            : 0));
    }
    return fail(errno_failure(quoted(name) + ": fallocate " + std::to_string(size) + " bytes",
                              err));
  }
  if (auto ok = platform::format_volume(image.get(), owner_, quoted(name)); !ok)
    return fail(ok.error());
  if (::renameat2(images_.get(), temp_name.c_str(), images_.get(), final_name.c_str(),
                  RENAME_NOREPLACE) != 0)
    return fail(errno_failure(quoted(name) + ": rename into place"));
  if (::mkdirat(mounts_.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
    return errno_failure(quoted(name) + ": mkdir mounts/" + name);
  if (::fsync(images_.get()) != 0)
    return errno_failure(quoted(name) + ": fsync images/");
  return {};
}

outcome<workspace_lease> workspace_store::open_workspace(const std::string& name) {
  if (auto ok = checked_name(name); !ok)
    return ok.error();
  std::lock_guard<std::mutex> guard(mutex_);
  auto image = open_image(name);
  if (!image)
    return image.error();
  auto& s = states_[name];
  if (!s.mounted) {
    if (::mkdirat(mounts_.get(), name.c_str(), 0700) != 0 && errno != EEXIST)
      return errno_failure(quoted(name) + ": mkdir mounts/" + name);
    auto state = platform::probe_mount_point(mounts_.get(), name, image->get());
    if (!state)
      return state.error().wrap(quoted(name));
    if (*state == platform::mount_point_state::other)
      if (auto ok = platform::unmount_volume(mounts_.get(), name); !ok)
        return ok.error().wrap(quoted(name));
    if (*state != platform::mount_point_state::this_image)
      if (auto ok = platform::mount_volume(image->get(), mounts_.get(), name, quoted(name)); !ok)
        return ok.error();
    s.mounted = true;
  }
  // The mount just made or found, held by an fd and checked to be the
  // image's: a sandbox binds this, not the path (which an unmount or a
  // rename could make name something else by then).
  auto root = platform::open_volume_root(mounts_.get(), name, image->get());
  if (!root) {
    if (s.users == 0) {
      (void)platform::unmount_volume(mounts_.get(), name);
      s.mounted = false;
    }
    return root.error().wrap(quoted(name));
  }
  ++s.users;
  return workspace_lease(shared_from_this(), name, host_path(name),
                         std::make_shared<const unique_fd>(std::move(*root)));
}

void workspace_store::release(const std::string& name) noexcept {
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = states_.find(name);
  if (it == states_.end() || it->second.users == 0)
    return;
  if (--it->second.users != 0 || !it->second.mounted)
    return;
  // The last lease went: unmounted (lazily: a sandbox that still holds its
  // bind keeps the file system until it is gone), so that mounts do not
  // accumulate with the workspaces ever used.
  (void)platform::unmount_volume(mounts_.get(), name);
  it->second.mounted = false;
}

outcome<std::map<std::string, uint64_t>> workspace_store::image_sizes() {
  auto names = entries_of(images_.get());
  if (!names)
    return names.error().wrap("images");
  std::map<std::string, uint64_t> out;
  for (const auto& file : *names) {
    if (!ends_with(file, image_suffix))
      continue;
    const std::string name = file.substr(0, file.size() - std::string(image_suffix).size());
    struct stat st;
    if (!validate_workspace_name(name) ||
        ::fstatat(images_.get(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    out[name] = static_cast<uint64_t>(st.st_size);
  }
  return out;
}

outcome<std::vector<workspace_info>> workspace_store::list() {
  std::lock_guard<std::mutex> guard(mutex_);
  auto names = entries_of(images_.get());
  if (!names)
    return names.error().wrap("workspace store " + path_ + ": images");
  std::vector<workspace_info> out;
  for (const auto& file : *names) {
    if (!ends_with(file, image_suffix))
      continue;
    const std::string name = file.substr(0, file.size() - std::string(image_suffix).size());
    if (!validate_workspace_name(name))
      continue;
    struct stat st;
    if (::fstatat(images_.get(), file.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
        !S_ISREG(st.st_mode))
      continue;
    workspace_info info;
    info.name = name;
    info.quota_bytes = static_cast<uint64_t>(st.st_size);
    info.image_bytes = static_cast<uint64_t>(st.st_blocks) * 512;
    auto it = states_.find(name);
    if (it != states_.end() && it->second.mounted) {
      info.mounted = true;
      info.users = it->second.users;
      auto usage = platform::usage_of(mounts_.get(), name);
      if (!usage)
        return usage.error().wrap(quoted(name));
      info.used_bytes = usage->used_bytes;
      info.free_bytes = usage->free_bytes;
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(),
            [](const workspace_info& a, const workspace_info& b) { return a.name < b.name; });
  return out;
}

outcome<void> workspace_store::remove(const std::string& name) {
  if (auto ok = checked_name(name); !ok)
    return ok.error();
  std::lock_guard<std::mutex> guard(mutex_);
  auto it = states_.find(name);
  if (it != states_.end() && it->second.users > 0)
    return kind(EBUSY, logic_failure(quoted(name) + " is in use (" + std::to_string(it->second.users) +
                         (it->second.users == 1 ? " lease" : " leases") + " open)"));
  auto image = open_image(name);
  if (!image)
    return image.error();
  if (auto ok = platform::unmount_volume(mounts_.get(), name); !ok)
    return ok.error().wrap(quoted(name));
  if (it != states_.end())
    states_.erase(it);
  if (::unlinkat(images_.get(), (name + image_suffix).c_str(), 0) != 0)
    return errno_failure(quoted(name) + ": unlink images/" + name + image_suffix);
  if (::unlinkat(mounts_.get(), name.c_str(), AT_REMOVEDIR) != 0 && errno != ENOENT)
    return errno_failure(quoted(name) + ": rmdir mounts/" + name);
  if (::fsync(images_.get()) != 0)
    return errno_failure(quoted(name) + ": fsync images/");
  return {};
}

} // namespace castellan
