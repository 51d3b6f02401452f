#pragma once

/// @file paths_in_root.hpp
/// How the mediator finds what a caller's path names (private to
/// actors/mediation). Every path the supervisor acts on is resolved with
/// openat2(RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the worker's root,
/// so `..` and symlinks stay inside it; nothing is ever looked up by name
/// from the supervisor's own root. Another process's /proc entry is refused
/// here whatever the policy says.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "actors/mediation/mediated_caller.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan {

namespace mediation {

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

/// The caller's umask (its /proc/<tid>/status), 077 when it cannot be read.
mode_t umask_of(mediated_caller& who);

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

} // namespace castellan
