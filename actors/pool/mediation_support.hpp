#pragma once

/// @file mediation_support.hpp
/// What the parts of syscall_mediator share (private to actors/pool): the
/// notification being decided and how it is answered, path resolution
/// inside the worker's root, events. Every path the supervisor acts on is
/// resolved with openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the
/// worker's root, so `..` and symlinks stay inside it; nothing is ever
/// looked up by name from the supervisor's own root.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/pool/syscall_mediator.hpp"

namespace castellan {

namespace mediation {

/// The longest path copied out of a caller (the kernel's own limit).
inline constexpr std::size_t max_path = 4095;

int64_t now_ns();

/// The name of a decided system call ("unlinkat"), "unknown" otherwise.
const char* syscall_name(int nr);

/// The sandbox-side path behind a /proc link ("/proc/self/fd/3",
/// "/proc/<tid>/cwd"). 0 or an errno (ENOENT for a removed object).
int link_path(const std::string& link, std::string& out);
/// The sandbox-side path of our own fd `fd`.
int fd_path(int fd, std::string& out);

/// openat2 from the worker's root with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
/// -1 with errno.
int open_in_root(int root, const std::string& path, uint64_t flags, uint64_t mode = 0);

/// `path` made absolute (relative ones against the caller's cwd or dirfd,
/// as the sandbox sees them). 0 or an errno.
int absolute(pid_t tid, int dirfd, const std::string& path, std::string& out);

/// Lexically normalised absolute path.
std::string normalise(const std::string& abs);

/// "dir/name" without a double slash at the root.
std::string join(const std::string& dir, const std::string& name);

/// A decision whose deny comes from the domain default, turned into an
/// allow: the static layers enforce the default (see the callers).
policy::decision rules_only(const policy::decision& d);

/// The caller's umask (/proc/<tid>/status), 077 when it cannot be read.
mode_t umask_of(pid_t tid);

/// Whether `fd`, resolved in a worker's root at `canon`, is an entry of the
/// sandbox's procfs that belongs to a process other than the caller `tid`
/// (`/proc/<N>/…` with N neither its thread group's nor its own number in
/// the sandbox). The supervisor must not open those for it: it would pass
/// the kernel's ptrace-mode checks with its own rights (hidepid, a process
/// that is not dumpable, another Landlock domain) where the caller fails
/// them. True also when the caller's numbers cannot be read.
bool other_process_proc_entry(int fd, const std::string& canon, pid_t tid);

policy_event make_event(const char* kind, const char* syscall, std::string target,
                        policy::action verdict, std::string_view rule, pid_t pid);

/// Whether the mount `fd` is on is read-only: the kernel answers EROFS
/// before it checks any permission, and so does the mediator.
bool on_read_only_mount(int fd);

/// Whether `a` and `b` are on the same mount (a rename or a link across
/// mounts is EXDEV, before any permission check).
bool same_mount(int a, int b);

/// Where a path names its last component: the parent directory, resolved
/// in the worker's root and held open (O_PATH), and the name in it.
struct located_name {
  enum class kind : uint8_t { normal, dot, dotdot, root };
  kind what = kind::normal;
  unique_fd parent;        ///< O_PATH | O_DIRECTORY (not for kind::root)
  std::string name;        ///< the last component, without slashes
  std::string path;        ///< the resolved parent's path + "/" + name: what is decided
  std::string parent_path; ///< the resolved parent's path
  bool trailing_slash = false;
};

/// Resolves the parent of `raw` (the caller's path, relative to `dirfd`)
/// inside the worker's root, following symlinks in the parent as the
/// kernel would, never the last component. 0 or an errno (ENOENT for an
/// empty path, the errno of the parent's resolution otherwise).
int locate(int root, pid_t tid, int dirfd, const std::string& raw, located_name& out);

/// locate() for a name the call is to create: 0 when nothing is there yet;
/// otherwise the kernel's errno — `exists` for an existing name (and for
/// ".", ".." or "/"), ENOENT for a trailing slash unless `slash_ok` (mkdir).
int locate_new(int root, pid_t tid, int dirfd, const std::string& raw, int exists, bool slash_ok,
               located_name& out);

} // namespace mediation

/// One notification being decided, and how it is answered.
struct syscall_mediator::call {
  platform::notification n;
  const char* name = "unknown";
  std::chrono::steady_clock::time_point received;
  mediated_worker* w = nullptr;
  mediation_result* r = nullptr;

  platform::notify_listener& listener() const { return *w->listener; }

  /// The kernel's own kind of answer (an errno the call would have had
  /// anyway): nothing to report.
  void fail(int err) const {
    (void)listener().respond_error(n.id, err);
    r->what = mediation_result::outcome::allow;
  }
  /// The call returns `value` (after the supervisor performed it).
  void succeed(int64_t value) const {
    if (!listener().respond_value(n.id, value))
      r->what = mediation_result::outcome::gone;
  }
  /// The caller went away, or its call was answered already.
  void gone() const { r->what = mediation_result::outcome::gone; }
  /// Still waiting? Call after copying the arguments and before acting.
  bool still_waiting() const { return listener().id_valid(n.id); }
};

} // namespace castellan
