#include "platform/linux/mounts.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include <cerrno>
#include <cstdio>

namespace castellan::platform {

outcome<void> make_mounts_private() {
  if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
    return errno_failure("mount --make-rprivate /");
  return {};
}

namespace {

/// open_tree(OPEN_TREE_CLONE | AT_RECURSIVE) of `path` at `dirfd`.
outcome<detached_tree> clone_at(int dirfd, const char* path, unsigned flags,
                                const std::string& source) {
  detached_tree tree;
  tree.source = source;
  tree.fd.reset(::open_tree(dirfd, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | flags));
  if (!tree.fd)
    return errno_failure("open_tree(OPEN_TREE_CLONE|AT_RECURSIVE) " + source);
  struct stat st;
  if (::fstat(tree.fd.get(), &st) != 0)
    return errno_failure("fstat detached tree of " + source);
  tree.is_dir = S_ISDIR(st.st_mode);
  return tree;
}

} // namespace

outcome<detached_tree> clone_tree(const std::string& source) {
  return clone_at(AT_FDCWD, source.c_str(), 0, source);
}

outcome<detached_tree> clone_tree_no_symlinks(const std::string& source) {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
  unique_fd at(static_cast<int>(::syscall(SYS_openat2, AT_FDCWD, source.c_str(), &how, sizeof how)));
  if (!at) {
    if (errno == ELOOP)
      return failure{ELOOP, "bind source " + source + " is or passes through a symlink: refused "
                            "(a symlink there could point anywhere on the host); name the real "
                            "path"};
    return errno_failure("openat2(RESOLVE_NO_SYMLINKS) " + source);
  }
  return clone_at(at.get(), "", AT_EMPTY_PATH, source);
}

outcome<detached_tree> clone_tree_of(int fd, const std::string& source) {
  return clone_at(fd, "", AT_EMPTY_PATH, source);
}

outcome<detached_tree> adopt_tree(int fd, const std::string& source) {
  detached_tree tree;
  tree.source = source;
  tree.fd.reset(fd);
  struct stat st;
  if (::fstat(tree.fd.get(), &st) != 0)
    return errno_failure("fstat the detached tree of " + source + " (fd " + std::to_string(fd) +
                         ")");
  // statx's STX_ATTR_MOUNT_ROOT tells the root of a mount from a plain
  // directory fd: anything else would be bound from wherever it points.
  struct statx sx;
  if (::statx(tree.fd.get(), "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) != 0)
    return errno_failure("statx the detached tree of " + source);
  if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) != 0 &&
      (sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) == 0)
    return logic_failure("fd " + std::to_string(fd) + " for " + source +
                         " is not the root of a detached mount");
  tree.is_dir = S_ISDIR(st.st_mode);
  return tree;
}

outcome<void> set_tree_attributes(int tree_fd, uint64_t set, uint64_t clear, bool recursive,
                                  const std::string& what) {
  mount_attr attr{};
  attr.attr_set = set;
  attr.attr_clr = clear;
  const unsigned flags = AT_EMPTY_PATH | (recursive ? unsigned{AT_RECURSIVE} : 0u);
  if (::mount_setattr(tree_fd, "", flags, &attr, sizeof attr) != 0)
    return errno_failure("mount_setattr " + what);
  return {};
}

outcome<void> attach_tree(const detached_tree& tree, const std::string& target) {
  if (::move_mount(tree.fd.get(), "", AT_FDCWD, target.c_str(), MOVE_MOUNT_F_EMPTY_PATH) != 0)
    return errno_failure("move_mount " + tree.source + " onto " + target);
  return {};
}

outcome<void> mount_tmpfs(const std::string& target, uint64_t size_bytes, unsigned mode,
                          bool exec, const std::string& name) {
  char data[64];
  if (size_bytes != 0)
    std::snprintf(data, sizeof data, "size=%llu,mode=%o",
                  static_cast<unsigned long long>(size_bytes), mode);
  else
    std::snprintf(data, sizeof data, "mode=%o", mode);
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (!exec)
    flags |= MS_NOEXEC;
  if (::mount(name.c_str(), target.c_str(), "tmpfs", flags, data) != 0)
    return errno_failure("mount tmpfs (" + std::string(data) + ") on " + target);
  return {};
}

outcome<void> mount_overlay(const std::string& lower, const std::string& upper,
                            const std::string& work, const std::string& target, bool exec) {
  // The options are one comma-separated string, and a lowerdir of several
  // layers is colon-separated: a path with either (or the escape character)
  // would be read as something else. root_builder's validate() refuses such
  // targets up front; this is the last line.
  for (const std::string* p : {&lower, &upper, &work})
    if (p->find_first_of(",:\\") != std::string::npos)
      return logic_failure("overlay on " + target + ": the path '" + *p +
                           "' has a ',', ':' or '\\', which overlay options cannot carry");
  const std::string data =
    "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work + ",userxattr";
  unsigned long flags = MS_NOSUID | MS_NODEV;
  if (!exec)
    flags |= MS_NOEXEC;
  if (::mount("castellan-overlay", target.c_str(), "overlay", flags, data.c_str()) != 0)
    return errno_failure("mount overlay (" + data + ") on " + target);
  return {};
}

outcome<std::string> mount_proc(const std::string& target, bool hide_pids, bool subset_pid) {
  // Strongest first. subset=pid leaves only the process directories (no
  // /proc/sys, /proc/kcore…); hidepid hides other users' processes.
  const char* const candidates[] = {"hidepid=invisible,subset=pid", "subset=pid",
                                    "hidepid=invisible", "hidepid=2", ""};
  int last_errno = 0;
  for (const char* options : candidates) {
    const std::string o = options;
    if (!subset_pid && o.find("subset") != std::string::npos)
      continue;
    if (!hide_pids && o.find("hidepid") != std::string::npos)
      continue;
    if (::mount("proc", target.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC,
                o.empty() ? nullptr : o.c_str()) == 0)
      return o;
    last_errno = errno;
    if (last_errno != EINVAL && last_errno != EPERM)
      break;
  }
  return errno_failure("mount proc on " + target + " (no option set accepted)", last_errno);
}

outcome<void> remount_read_only(const std::string& target) {
  mount_attr attr{};
  attr.attr_set = MOUNT_ATTR_RDONLY;
  if (::mount_setattr(AT_FDCWD, target.c_str(), 0, &attr, sizeof attr) != 0)
    return errno_failure("mount_setattr MOUNT_ATTR_RDONLY " + target);
  return {};
}

outcome<void> pivot_to(const std::string& new_root) {
  if (::chdir(new_root.c_str()) != 0)
    return errno_failure("chdir " + new_root);
  // With new_root == put_old the old root ends up stacked on the new one, at
  // ".", without needing a directory for it.
  if (::syscall(SYS_pivot_root, ".", ".") != 0)
    return errno_failure("pivot_root " + new_root);
  if (::umount2(".", MNT_DETACH) != 0)
    return errno_failure("umount2(MNT_DETACH) the old root");
  if (::chdir("/") != 0)
    return errno_failure("chdir / after pivot_root");
  return {};
}

outcome<mask_outcome> mask_path(const std::string& root, const std::string& path,
                                const std::string& empty_file) {
  unique_fd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!root_fd)
    return errno_failure("open " + root);
  open_how how{};
  how.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const std::string relative = path.empty() || path[0] != '/' ? path : path.substr(1);
  unique_fd target(static_cast<int>(
    ::syscall(SYS_openat2, root_fd.get(), relative.c_str(), &how, sizeof how)));
  if (!target) {
    if (errno == ENOENT || errno == ENOTDIR)
      return mask_outcome::missing;
    return errno_failure("mask " + path + ": openat2 in root");
  }
  struct stat st;
  if (::fstat(target.get(), &st) != 0)
    return errno_failure("mask " + path + ": fstat");
  const uint64_t attrs = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                         MOUNT_ATTR_NOEXEC;
  unique_fd cover;
  if (S_ISDIR(st.st_mode)) {
    unique_fd fs(::fsopen("tmpfs", FSOPEN_CLOEXEC));
    if (!fs)
      return errno_failure("mask " + path + ": fsopen tmpfs");
    if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "mode", "000", 0) != 0 ||
        ::fsconfig(fs.get(), FSCONFIG_SET_STRING, "size", "4096", 0) != 0 ||
        ::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0)
      return errno_failure("mask " + path + ": configure tmpfs");
    cover.reset(::fsmount(fs.get(), FSMOUNT_CLOEXEC, static_cast<unsigned>(attrs)));
    if (!cover)
      return errno_failure("mask " + path + ": fsmount");
  } else {
    cover.reset(::open_tree(AT_FDCWD, empty_file.c_str(), OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC));
    if (!cover)
      return errno_failure("mask " + path + ": open_tree " + empty_file);
    if (auto r = set_tree_attributes(cover.get(), attrs, 0, false, empty_file); !r)
      return r.error().wrap("mask " + path);
  }
  if (::move_mount(cover.get(), "", target.get(), "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return errno_failure("mask " + path + ": move_mount");
  return S_ISDIR(st.st_mode) ? mask_outcome::masked_directory : mask_outcome::masked_file;
}

outcome<void> make_directories(const std::string& base, const std::string& relative) {
  unique_fd dir(::open(base.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir)
    return errno_failure("open " + base);
  std::size_t pos = 0;
  std::string done = base;
  while (pos < relative.size()) {
    std::size_t end = relative.find('/', pos);
    if (end == std::string::npos)
      end = relative.size();
    const std::string part = relative.substr(pos, end - pos);
    pos = end + 1;
    if (part.empty())
      continue;
    done += "/" + part;
    if (::mkdirat(dir.get(), part.c_str(), 0755) != 0 && errno != EEXIST)
      return errno_failure("mkdir " + done);
    unique_fd next(::openat(dir.get(), part.c_str(),
                            O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (!next)
      return errno_failure("open " + done + " (a directory, not a symlink)");
    dir = std::move(next);
  }
  return {};
}

} // namespace castellan::platform
