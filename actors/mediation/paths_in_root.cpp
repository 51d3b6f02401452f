#include "actors/mediation/paths_in_root.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <linux/magic.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <climits>
#include <cstring>
#include <vector>

namespace castellan::mediation {

int link_path(const std::string& link, std::string& out) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  return link_target(buf, n, sizeof buf, out);
}

int link_target(const char* buf, ssize_t n, std::size_t size, std::string& out) {
  if (n < 0)
    return errno == ENOENT ? EBADF : errno;
  if (static_cast<std::size_t>(n) >= size)
    return ENAMETOOLONG;
  if (n == 0 || buf[0] != '/')
    return ENOTDIR; // a pipe, socket or anonymous inode
  out.assign(buf, static_cast<std::size_t>(n));
  static constexpr std::string_view deleted = " (deleted)";
  if (out.size() > deleted.size() &&
      out.compare(out.size() - deleted.size(), deleted.size(), deleted) == 0)
    return ENOENT; // removed meanwhile: nothing by that name to decide on
  return 0;
}

int fd_path(int fd, std::string& out) {
  return link_path("/proc/self/fd/" + std::to_string(fd), out);
}

int open_in_root(int root, const std::string& path, uint64_t flags, uint64_t mode) {
  open_how how{};
  how.flags = flags;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, root, path.c_str(), &how, sizeof how);
  return fd < 0 ? -1 : static_cast<int>(fd);
}

namespace {

/// "/proc/self" and "/proc/thread-self" name the caller as the procfs of
/// its sandbox sees it; looked up by the supervisor they would name the
/// supervisor's thread, which that procfs does not know. They are replaced
/// with the caller's numbers in its own pid namespace. Empty components and
/// "." before them are skipped ("//proc/./self"), as the kernel would.
int caller_proc_self(mediated_caller& who, std::string& path) {
  std::size_t at = 0;
  auto component = [&](std::string_view& out) {
    for (;;) {
      while (at < path.size() && path[at] == '/')
        ++at;
      const std::size_t end = std::min(path.find('/', at), path.size());
      out = std::string_view(path).substr(at, end - at);
      at = end;
      if (out != ".")
        return;
    }
  };
  std::string_view first;
  std::string_view second;
  component(first);
  if (first != "proc")
    return 0;
  component(second);
  if (second != "self" && second != "thread-self")
    return 0;
  long tgid = 0;
  long tid = 0;
  if (int err = who.ns_ids(tgid, tid); err != 0)
    return err;
  std::string self = "/proc/" + std::to_string(tgid);
  if (second == "thread-self")
    self += "/task/" + std::to_string(tid);
  path = self + path.substr(at);
  return 0;
}

/// The number n of a path below /proc/<n> (after lexical normalisation);
/// 0 when the path is not in a numbered /proc entry.
long proc_entry_number(const std::string& normalised) {
  static constexpr std::string_view prefix = "/proc/";
  if (normalised.compare(0, prefix.size(), prefix) != 0)
    return 0;
  const std::size_t end = std::min(normalised.find('/', prefix.size()), normalised.size());
  const std::string_view num(normalised.data() + prefix.size(), end - prefix.size());
  if (num.empty() || num.size() > 10)
    return 0;
  long n = 0;
  for (char ch : num) {
    if (ch < '0' || ch > '9')
      return 0;
    n = n * 10 + (ch - '0');
  }
  return n;
}

} // namespace

int absolute(mediated_caller& who, int dirfd, const std::string& path, std::string& out) {
  if (!path.empty() && path.front() == '/') {
    out = path;
  } else {
    std::string base;
    if (int err = who.link_path(dirfd == AT_FDCWD ? std::string("cwd")
                                                  : "fd/" + std::to_string(dirfd),
                                base);
        err != 0)
      return err;
    out = base == "/" ? "/" + path : base + "/" + path;
  }
  return caller_proc_self(who, out);
}

int other_process_entry(mediated_caller& who, const std::string& path) {
  const long n = proc_entry_number(normalise(path));
  if (n == 0)
    return 0;
  long tgid = 0;
  long tid = 0;
  if (int err = who.ns_ids(tgid, tid); err != 0)
    return err;
  return n == tgid || n == tid ? 0 : EACCES;
}

bool own_process_entry(mediated_caller& who, const std::string& path) {
  const long n = proc_entry_number(normalise(path));
  long tgid = 0;
  long tid = 0;
  return n != 0 && who.ns_ids(tgid, tid) == 0 && (n == tgid || n == tid);
}

int other_process_object(mediated_caller& who, int fd, const std::string& path) {
  struct statfs fs;
  if (::fstatfs(fd, &fs) != 0)
    return errno;
  if (fs.f_type != PROC_SUPER_MAGIC)
    return 0;
  if (path != "/proc" && path.compare(0, 6, "/proc/") != 0)
    return EACCES;
  return other_process_entry(who, path);
}

std::string normalise(const std::string& abs) {
  std::vector<std::string_view> parts;
  std::string_view rest(abs);
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string_view part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".")
      continue;
    if (part == "..") {
      if (!parts.empty())
        parts.pop_back();
      continue;
    }
    parts.push_back(part);
  }
  std::string out;
  for (auto p : parts) {
    out += '/';
    out += p;
  }
  return out.empty() ? "/" : out;
}

std::string join(const std::string& dir, const std::string& name) {
  return dir == "/" ? "/" + name : dir + "/" + name;
}

mode_t umask_of(mediated_caller& who) {
  char buf[2048];
  if (who.read_small("status", buf, sizeof buf) <= 0)
    return 077; // unknown: the most private
  const char* line = std::strstr(buf, "\nUmask:");
  if (line == nullptr)
    return 077;
  return static_cast<mode_t>(std::strtoul(line + 7, nullptr, 8) & 0777);
}

bool on_read_only_mount(int fd) {
  struct statvfs vfs;
  return ::fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_RDONLY) != 0;
}

bool same_mount(int a, int b) {
  struct statx sa;
  struct statx sb;
  if (::statx(a, "", AT_EMPTY_PATH, STATX_MNT_ID, &sa) != 0 ||
      ::statx(b, "", AT_EMPTY_PATH, STATX_MNT_ID, &sb) != 0 ||
      (sa.stx_mask & sb.stx_mask & STATX_MNT_ID) == 0)
    return true; // unknown: let the kernel say EXDEV if it must
  return sa.stx_mnt_id == sb.stx_mnt_id;
}

int locate(int root, mediated_caller& who, int dirfd, const std::string& raw, located_name& out) {
  if (raw.empty())
    return ENOENT;
  std::string abs;
  if (int err = absolute(who, dirfd, raw, abs); err != 0)
    return err;
  // The kernel looks the last component up in its parent; trailing slashes
  // only say that it must be a directory (each caller applies that rule).
  std::size_t end = abs.size();
  while (end > 1 && abs[end - 1] == '/')
    --end;
  out.trailing_slash = end != abs.size();
  if (end == 1) {
    out.what = located_name::kind::root;
    out.name.clear();
    out.path = "/";
    out.parent_path = "/";
    return 0;
  }
  const std::size_t slash = abs.rfind('/', end - 1);
  out.name = abs.substr(slash + 1, end - slash - 1);
  const std::string parent = slash == 0 ? std::string("/") : abs.substr(0, slash);
  out.what = out.name == "."    ? located_name::kind::dot
             : out.name == ".." ? located_name::kind::dotdot
                                : located_name::kind::normal;
  out.parent.reset(open_in_root(root, parent, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!out.parent)
    return errno;
  if (int err = fd_path(out.parent.get(), out.parent_path); err != 0)
    return err;
  out.path = join(out.parent_path, out.name);
  return 0;
}

int locate_new(int root, mediated_caller& who, int dirfd, const std::string& raw, int exists,
               bool slash_ok, located_name& out) {
  if (int err = locate(root, who, dirfd, raw, out); err != 0)
    return err;
  if (out.what != located_name::kind::normal)
    return exists;
  struct stat st;
  if (::fstatat(out.parent.get(), out.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
    return exists;
  if (errno != ENOENT)
    return errno;
  if (out.trailing_slash && !slash_ok)
    return ENOENT;
  return 0;
}

} // namespace castellan::mediation
