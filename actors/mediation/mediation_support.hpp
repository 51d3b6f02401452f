#pragma once

/// @file mediation_support.hpp
/// What the parts of syscall_mediator share (private to actors/mediation): the
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

#include "actors/mediation/mediated_caller.hpp"
#include "actors/mediation/syscall_mediator.hpp"

namespace castellan {

namespace mediation {

/// The longest path copied out of a caller (the kernel's own limit).
inline constexpr std::size_t max_path = 4095;

int64_t now_ns();

/// The name of a decided system call ("unlinkat"), "unknown" otherwise.
const char* syscall_name(int nr);

/// The sandbox-side path behind one of our own /proc links
/// ("/proc/self/fd/3"). 0 or an errno (ENOENT for a removed object).
int link_path(const std::string& link, std::string& out);

/// What a /proc fd or cwd link names, from what readlink put in `buf`
/// (`n` bytes of a `size`-byte buffer, or -1 with errno set): 0 and the path
/// in `out`, or EBADF (no such link), ENAMETOOLONG, ENOTDIR (not a path: a
/// pipe, socket or anonymous inode) or ENOENT (removed meanwhile).
int link_target(const char* buf, ssize_t n, std::size_t size, std::string& out);
/// The sandbox-side path of our own fd `fd`.
int fd_path(int fd, std::string& out);

/// openat2 from the worker's root with RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
/// -1 with errno.
int open_in_root(int root, const std::string& path, uint64_t flags, uint64_t mode = 0);

/// `path` made absolute (relative ones against the caller's cwd or dirfd,
/// as the sandbox sees them), with a leading /proc/self or
/// /proc/thread-self turned into the caller's own numbers. 0 or an errno.
int absolute(mediated_caller& who, int dirfd, const std::string& path, std::string& out);

/// Whether `path` (absolute, as the sandbox sees it) lies in the /proc
/// entry of a process other than the caller: /proc/<n> where n is neither
/// the caller's thread group id nor its own thread id in its pid namespace.
/// Such an entry is the other process's (its memory, maps, environment,
/// fds): the supervisor never opens it for a worker, whatever the policy
/// says. EACCES for such a path, else 0 (or an errno reading the caller's
/// ids).
int other_process_entry(mediated_caller& who, const std::string& path);

/// Whether `path` lies in the caller's own /proc entry (/proc/<n>, n its
/// thread group id or thread id in its pid namespace). The kernel lets a
/// process into its own entry whether or not it is dumpable; the supervisor
/// reaches it for the caller with CAP_SYS_PTRACE (procfs has no symlink
/// there but magic links, which the resolution refuses, so nothing else is
/// reached with it).
bool own_process_entry(mediated_caller& who, const std::string& path);

/// other_process_entry() for the object our fd `fd` names, resolved: also
/// EACCES for a procfs object whose path does not start with /proc (a
/// procfs reached some other way is not told apart).
int other_process_object(mediated_caller& who, int fd, const std::string& path);

/// Lexically normalised absolute path.
std::string normalise(const std::string& abs);

/// "dir/name" without a double slash at the root.
std::string join(const std::string& dir, const std::string& name);

/// A decision whose deny comes from the domain default, turned into an
/// allow: the static layers enforce the default (see the callers).
policy::decision rules_only(const policy::decision& d);

/// The caller's umask (its /proc/<tid>/status), 077 when it cannot be read.
mode_t umask_of(mediated_caller& who);

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
int locate(int root, mediated_caller& who, int dirfd, const std::string& raw, located_name& out);

/// locate() for a name the call is to create: 0 when nothing is there yet;
/// otherwise the kernel's errno — `exists` for an existing name (and for
/// ".", ".." or "/"), ENOENT for a trailing slash unless `slash_ok` (mkdir).
int locate_new(int root, mediated_caller& who, int dirfd, const std::string& raw, int exists,
               bool slash_ok, located_name& out);

} // namespace mediation

/// One notification being decided, and how it is answered.
struct syscall_mediator::call {
  platform::notification n;
  const char* name = "unknown";
  std::chrono::steady_clock::time_point received;
  mediated_worker* w = nullptr;
  mediation_result* r = nullptr;
  /// The caller, addressed through its own handles (mediated_caller.hpp).
  mediation::mediated_caller caller;

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
  /// Still waiting? Call after copying the arguments and before acting:
  /// from then on the caller is reached through its handles only, and a
  /// further read of its memory is checked again.
  bool still_waiting() {
    if (!caller.still_waiting())
      return false;
    caller.mark_checked();
    return true;
  }
};

} // namespace castellan
