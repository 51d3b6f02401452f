#include "actors/pool/mediation_support.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

namespace castellan::mediation {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

const char* syscall_name(int nr) {
  switch (nr) {
#ifdef SYS_open
  case SYS_open:
    return "open";
#endif
#ifdef SYS_creat
  case SYS_creat:
    return "creat";
#endif
  case SYS_openat:
    return "openat";
  case SYS_openat2:
    return "openat2";
  case SYS_execve:
    return "execve";
  case SYS_execveat:
    return "execveat";
#ifdef SYS_unlink
  case SYS_unlink:
    return "unlink";
#endif
  case SYS_unlinkat:
    return "unlinkat";
#ifdef SYS_rmdir
  case SYS_rmdir:
    return "rmdir";
#endif
#ifdef SYS_mkdir
  case SYS_mkdir:
    return "mkdir";
#endif
  case SYS_mkdirat:
    return "mkdirat";
#ifdef SYS_mknod
  case SYS_mknod:
    return "mknod";
#endif
  case SYS_mknodat:
    return "mknodat";
#ifdef SYS_symlink
  case SYS_symlink:
    return "symlink";
#endif
  case SYS_symlinkat:
    return "symlinkat";
#ifdef SYS_link
  case SYS_link:
    return "link";
#endif
  case SYS_linkat:
    return "linkat";
#ifdef SYS_rename
  case SYS_rename:
    return "rename";
#endif
#ifdef SYS_renameat
  case SYS_renameat:
    return "renameat";
#endif
  case SYS_renameat2:
    return "renameat2";
  case SYS_truncate:
    return "truncate";
  case SYS_connect:
    return "connect";
  case SYS_bind:
    return "bind";
  case SYS_sendto:
    return "sendto";
  case SYS_sendmsg:
    return "sendmsg";
  case SYS_sendmmsg:
    return "sendmmsg";
  default:
    return "unknown";
  }
}

int link_path(const std::string& link, std::string& out) {
  char buf[PATH_MAX];
  const ssize_t n = ::readlink(link.c_str(), buf, sizeof buf);
  if (n < 0)
    return errno == ENOENT ? EBADF : errno;
  if (static_cast<std::size_t>(n) >= sizeof buf)
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

/// The last (innermost namespace's) number of a "NStgid:"/"NSpid:" line of
/// /proc/<tid>/status; 0 if missing.
long innermost(const char* status, const char* key) {
  const char* line = std::strstr(status, key);
  if (line == nullptr)
    return 0;
  line += std::strlen(key);
  const char* end = std::strchr(line, '\n');
  long last = 0;
  for (char* p = const_cast<char*>(line); end == nullptr || p < end;) {
    char* next = nullptr;
    const long v = std::strtol(p, &next, 10);
    if (next == p)
      break;
    last = v;
    p = next;
  }
  return last;
}

/// "/proc/self" and "/proc/thread-self" name the caller as the procfs of
/// its sandbox sees it; looked up by the supervisor they would name the
/// supervisor's thread, which that procfs does not know. They are replaced
/// with the caller's numbers in its own pid namespace.
int caller_proc_self(pid_t tid, std::string& path) {
  const std::string_view p(path);
  std::size_t len = 0;
  bool thread = false;
  for (const std::string_view prefix :
       {std::string_view("/proc/self"), std::string_view("/proc/thread-self")}) {
    if (p.compare(0, prefix.size(), prefix) == 0 &&
        (p.size() == prefix.size() || p[prefix.size()] == '/')) {
      len = prefix.size();
      thread = prefix.size() > 10;
    }
  }
  if (len == 0)
    return 0;
  const std::string file = "/proc/" + std::to_string(tid) + "/status";
  unique_fd fd(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[4096];
  const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  if (n <= 0)
    return ESRCH;
  buf[n] = '\0';
  const long tgid = innermost(buf, "\nNStgid:");
  const long pid = innermost(buf, "\nNSpid:");
  if (tgid <= 0 || pid <= 0)
    return ESRCH;
  std::string self = "/proc/" + std::to_string(tgid);
  if (thread)
    self += "/task/" + std::to_string(pid);
  path = self + path.substr(len);
  return 0;
}

} // namespace

int absolute(pid_t tid, int dirfd, const std::string& path, std::string& out) {
  if (!path.empty() && path.front() == '/') {
    out = path;
  } else {
    std::string base;
    const std::string proc = "/proc/" + std::to_string(tid);
    if (int err = link_path(
            dirfd == AT_FDCWD ? proc + "/cwd" : proc + "/fd/" + std::to_string(dirfd), base);
        err != 0)
      return err;
    out = base == "/" ? "/" + path : base + "/" + path;
  }
  return caller_proc_self(tid, out);
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

policy::decision rules_only(const policy::decision& d) {
  if (d.source == policy::decision_source::default_action && d.verdict == policy::action::deny)
    return policy::decision{policy::action::allow, policy::decision_source::default_action, -1,
                            d.pointer};
  return d;
}

mode_t umask_of(pid_t tid) {
  const std::string path = "/proc/" + std::to_string(tid) + "/status";
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[2048];
  const ssize_t n = fd ? ::read(fd.get(), buf, sizeof buf - 1) : -1;
  if (n <= 0)
    return 077; // unknown: the most private
  buf[n] = '\0';
  const char* line = std::strstr(buf, "\nUmask:");
  if (line == nullptr)
    return 077;
  return static_cast<mode_t>(std::strtoul(line + 7, nullptr, 8) & 0777);
}

bool other_process_proc_entry(int fd, const std::string& canon, pid_t tid) {
  struct statfs fs {};
  if (::fstatfs(fd, &fs) != 0 || fs.f_type != PROC_SUPER_MAGIC)
    return false;
  constexpr std::string_view prefix = "/proc/";
  if (canon.compare(0, prefix.size(), prefix) != 0)
    return false;
  const std::size_t end = canon.find('/', prefix.size());
  const std::string number =
      canon.substr(prefix.size(), end == std::string::npos ? std::string::npos : end - prefix.size());
  if (number.empty() || number.find_first_not_of("0123456789") != std::string::npos ||
      number.size() > 9)
    return false; // not a process's directory
  const long n = std::strtol(number.c_str(), nullptr, 10);
  const std::string file = "/proc/" + std::to_string(tid) + "/status";
  unique_fd status(::open(file.c_str(), O_RDONLY | O_CLOEXEC));
  char buf[4096];
  const ssize_t got = status ? ::read(status.get(), buf, sizeof buf - 1) : -1;
  if (got <= 0)
    return true;
  buf[got] = '\0';
  return n != innermost(buf, "\nNStgid:") && n != innermost(buf, "\nNSpid:");
}

policy_event make_event(const char* kind, const char* syscall, std::string target,
                        policy::action verdict, std::string_view rule, pid_t pid) {
  policy_event e;
  e.kind = kind;
  e.syscall = syscall;
  e.target = std::move(target);
  e.decision = verdict == policy::action::deny   ? "deny"
               : verdict == policy::action::warn ? "warn"
                                                 : "allow";
  e.rule = std::string(rule);
  e.pid = pid;
  e.timestamp_ns = now_ns();
  return e;
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

int locate(int root, pid_t tid, int dirfd, const std::string& raw, located_name& out) {
  if (raw.empty())
    return ENOENT;
  std::string abs;
  if (int err = absolute(tid, dirfd, raw, abs); err != 0)
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

int locate_new(int root, pid_t tid, int dirfd, const std::string& raw, int exists, bool slash_ok,
               located_name& out) {
  if (int err = locate(root, tid, dirfd, raw, out); err != 0)
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
