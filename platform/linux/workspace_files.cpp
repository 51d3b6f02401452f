#include "platform/linux/workspace_files.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

namespace castellan::platform {

namespace {

} // namespace

entry_type type_of_mode(unsigned m) {
  if (S_ISREG(m))
    return entry_type::file;
  if (S_ISDIR(m))
    return entry_type::directory;
  if (S_ISLNK(m))
    return entry_type::symlink;
  if (S_ISFIFO(m))
    return entry_type::fifo;
  if (S_ISSOCK(m))
    return entry_type::socket;
  if (S_ISCHR(m))
    return entry_type::char_device;
  if (S_ISBLK(m))
    return entry_type::block_device;
  return entry_type::other;
}

namespace {

/// A symlink's target, read from its directory and name (never followed);
/// empty when it went away meanwhile.
std::string link_target(int dir_fd, const char* name) {
  std::string buf(4096, '\0');
  const ssize_t n = ::readlinkat(dir_fd, name, buf.data(), buf.size());
  if (n < 0)
    return {};
  buf.resize(static_cast<std::size_t>(n));
  return buf;
}

workspace_entry entry_of(const struct stat& st, std::string name) {
  workspace_entry e;
  e.name = std::move(name);
  e.type = type_of_mode(st.st_mode);
  e.size = static_cast<uint64_t>(st.st_size);
  e.mode = static_cast<uint32_t>(st.st_mode & 07777);
  e.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return e;
}

/// One name of `dir_fd`, opened without following a symlink or crossing a
/// mount (ELOOP, EXDEV): how every walk below goes down one level.
int open_child(int dir_fd, const std::string& name, int flags) {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC | O_NOFOLLOW);
  how.resolve = workspace_resolve_flags() | RESOLVE_NO_SYMLINKS;
  long fd = -1;
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, dir_fd, name.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN)
      break;
  }
  return static_cast<int>(fd);
}

constexpr int max_depth = 256;

/// Empties the directory `name` of `dir_fd` and removes it. The directory
/// is opened without following a symlink: one the sandbox put in its place
/// is removed itself, and nothing it points to is touched. Entries are
/// unlinked from the directory's own fd, so a rename of anything above it
/// meanwhile changes nothing of what is removed.
outcome<void> remove_tree(int dir_fd, const std::string& name, const std::string& shown,
                          int depth) {
  if (depth > max_depth)
    return failure{ELOOP, shown + ": more than " + std::to_string(max_depth) +
                            " directory levels"};
  for (int pass = 0; pass < 4; ++pass) {
    unique_fd sub(open_child(dir_fd, name, O_RDONLY | O_DIRECTORY));
    if (!sub) {
      if (errno == ENOENT)
        return outcome<void>{};
      if (errno == ENOTDIR || errno == ELOOP) {
        // Replaced by a file or a symlink meanwhile: that entry goes.
        if (::unlinkat(dir_fd, name.c_str(), 0) != 0 && errno != ENOENT)
          return errno_failure(shown + ": unlink");
        return outcome<void>{};
      }
      return errno_failure(shown + ": open");
    }
    const int walk_fd = ::dup(sub.get());
    if (walk_fd < 0)
      return errno_failure(shown + ": dup");
    DIR* d = ::fdopendir(walk_fd);
    if (d == nullptr) {
      ::close(walk_fd);
      return errno_failure(shown + ": fdopendir");
    }
    std::vector<std::string> names;
    while (auto* ent = ::readdir(d)) {
      const std::string n = ent->d_name;
      if (n != "." && n != "..")
        names.push_back(n);
    }
    ::closedir(d);
    for (const auto& n : names) {
      if (::unlinkat(sub.get(), n.c_str(), 0) == 0 || errno == ENOENT)
        continue;
      if (errno != EISDIR)
        return errno_failure(shown + "/" + n + ": unlink");
      if (auto r = remove_tree(sub.get(), n, shown + "/" + n, depth + 1); !r)
        return r;
    }
    if (::unlinkat(dir_fd, name.c_str(), AT_REMOVEDIR) == 0 || errno == ENOENT)
      return outcome<void>{};
    if (errno != ENOTEMPTY)
      return errno_failure(shown + ": rmdir");
    // The sandbox wrote into it meanwhile: another pass, a few at most.
  }
  return failure{ENOTEMPTY, shown + ": still not empty after 4 passes (something keeps "
                                    "writing into it)"};
}

} // namespace

std::string files_error_code(const failure& f) {
  switch (f.code) {
    case EINVAL:
    case ENAMETOOLONG:
      return "invalid_path";
    case EXDEV:
    case ELOOP:
      return "escapes_workspace";
    case ENOENT:
      return "not_found";
    case ENOTDIR:
      return "not_a_directory";
    case EISDIR:
      return "is_a_directory";
    case special_file_errno:
      return "not_regular";
    case ENOTEMPTY:
      return "not_empty";
    case EEXIST:
      return "exists";
    case ENOSPC:
    case EDQUOT:
      return "no_space";
    case EFBIG:
      return "too_large";
    case tree_changed_errno:
      return "changed";
    case EACCES:
    case EPERM:
    case EROFS:
      return "permission_denied";
    default:
      return "io_error";
  }
}

std::string to_string(entry_type t) {
  switch (t) {
    case entry_type::file: return "file";
    case entry_type::directory: return "directory";
    case entry_type::symlink: return "symlink";
    case entry_type::fifo: return "fifo";
    case entry_type::socket: return "socket";
    case entry_type::char_device: return "char_device";
    case entry_type::block_device: return "block_device";
    case entry_type::other: break;
  }
  return "other";
}

outcome<workspace_entry> stat_entry(int root_fd, const workspace_path& path) {
  // O_PATH | O_NOFOLLOW: the last component is looked at, never opened for
  // reading (a FIFO does not block, a device is not touched) nor followed.
  auto fd = open_beneath(root_fd, path, O_PATH | O_NOFOLLOW);
  if (!fd)
    return fd.error();
  struct stat st{};
  if (::fstat(fd->get(), &st) != 0)
    return errno_failure(path.display() + ": fstat");
  auto e = entry_of(st, path.is_root() ? std::string() : path.parts.back());
  if (S_ISLNK(st.st_mode))
    e.link_target = link_target(fd->get(), "");
  return e;
}

outcome<directory_listing> list_directory(int root_fd, const workspace_path& path,
                                          std::size_t max_entries) {
  // O_DIRECTORY: anything else (a FIFO included) fails ENOTDIR, unopened.
  auto fd = open_beneath(root_fd, path, O_RDONLY | O_DIRECTORY);
  if (!fd)
    return fd.error();
  const int dir_fd = fd->get();
  const int walk_fd = ::dup(dir_fd);
  if (walk_fd < 0)
    return errno_failure(path.display() + ": dup");
  DIR* d = ::fdopendir(walk_fd);
  if (d == nullptr) {
    ::close(walk_fd);
    return errno_failure(path.display() + ": fdopendir");
  }
  directory_listing out;
  while (auto* ent = ::readdir(d)) {
    const std::string name = ent->d_name;
    if (name == "." || name == "..")
      continue;
    if (out.entries.size() >= max_entries) {
      out.truncated = true;
      break;
    }
    struct stat st{};
    // Relative to the directory's fd, not following: what the name is now.
    if (::fstatat(dir_fd, name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue; // gone meanwhile
    auto e = entry_of(st, name);
    if (S_ISLNK(st.st_mode))
      e.link_target = link_target(dir_fd, name.c_str());
    out.entries.push_back(std::move(e));
  }
  ::closedir(d);
  std::sort(out.entries.begin(), out.entries.end(),
            [](const workspace_entry& a, const workspace_entry& b) { return a.name < b.name; });
  return out;
}

outcome<void> remove_entry(int root_fd, const workspace_path& path, bool recursive) {
  if (path.is_root())
    return failure{EINVAL, "/workspace itself cannot be removed"};
  auto parent = open_parent(root_fd, path);
  if (!parent)
    return parent.error();
  const int dir_fd = parent->dir.get();
  const char* name = parent->name.c_str();
  // unlinkat on a name of the parent's fd removes that entry: a symlink is
  // removed itself, whatever it points to.
  if (::unlinkat(dir_fd, name, 0) == 0)
    return outcome<void>{};
  if (errno != EISDIR)
    return errno_failure(path.display() + ": remove");
  if (recursive)
    return remove_tree(dir_fd, parent->name, path.display(), 0);
  if (::unlinkat(dir_fd, name, AT_REMOVEDIR) == 0)
    return outcome<void>{};
  const int err = errno;
  return failure{err, path.display() + (err == ENOTEMPTY
                                          ? ": the directory is not empty (remove it recursively)"
                                          : ": rmdir")};
}

outcome<unique_fd> make_directories(int root_fd, const workspace_path& path,
                                    const volume_owner& owner) {
  unique_fd cur(::openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!cur)
    return errno_failure("/workspace: open");
  workspace_path walked;
  for (const auto& part : path.parts) {
    walked.parts.push_back(part);
    const bool made = ::mkdirat(cur.get(), part.c_str(), 0755) == 0;
    if (!made && errno != EEXIST)
      return errno_failure(walked.display() + ": mkdir");
    // Opened from the directory before it, not following a symlink: a
    // symlink (even one that stays inside) is refused, and a directory
    // swapped for one between mkdirat and here is refused the same way.
    unique_fd next(open_child(cur.get(), part, O_RDONLY | O_DIRECTORY));
    if (!next) {
      int err = errno;
      struct stat st{};
      if (err == ENOTDIR && ::fstatat(cur.get(), part.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
          S_ISLNK(st.st_mode))
        err = ELOOP; // O_DIRECTORY says ENOTDIR before O_NOFOLLOW says ELOOP
      return failure{err, walked.display() + (err == ELOOP ? ": a symlink, which is not followed here"
                                                           : ": not a directory")};
    }
    if (made && ::fchown(next.get(), owner.uid, owner.gid) != 0)
      return errno_failure(walked.display() + ": chown");
    cur = std::move(next);
  }
  return cur;
}

outcome<void> make_directory(int root_fd, const workspace_path& path, bool parents,
                             const volume_owner& owner) {
  if (parents) {
    auto fd = make_directories(root_fd, path, owner);
    if (!fd)
      return fd.error();
    return outcome<void>{};
  }
  if (path.is_root())
    return failure{EEXIST, "/workspace exists"};
  auto parent = open_parent(root_fd, path);
  if (!parent)
    return parent.error();
  if (::mkdirat(parent->dir.get(), parent->name.c_str(), 0755) != 0) {
    const int err = errno;
    return failure{err, path.display() + (err == EEXIST ? ": exists" : ": mkdir")};
  }
  unique_fd made(open_child(parent->dir.get(), parent->name, O_RDONLY | O_DIRECTORY));
  if (!made)
    return errno_failure(path.display() + ": replaced right after it was made");
  if (::fchown(made.get(), owner.uid, owner.gid) != 0)
    return errno_failure(path.display() + ": chown");
  return outcome<void>{};
}

} // namespace castellan::platform
