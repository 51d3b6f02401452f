/// @file mediated_opens.cpp
/// The open family (open, openat, creat, openat2), decided by
/// syscall_mediator and performed by the supervisor itself.
///
/// The path is copied out of the caller once and made absolute against its
/// cwd or dirfd (as the sandbox sees them); the supervisor opens it from the
/// worker's root with openat2 (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS),
/// first as O_PATH, and decides on the path of the object it actually
/// opened (symlinks resolved). The caller gets a reopen of that very object
/// with its own flags, injected with SECCOMP_IOCTL_NOTIF_ADDFD: its buffer is
/// never read again, so flipping it changes nothing. A creation is decided
/// on the resolved parent and the new name, and made exclusively in that
/// directory. Reads are optimistic (a denial ends the worker before it holds
/// the file); writes, truncations and creations are synchronous (EACCES).

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <string>
#include <string_view>

#include <spdlog/spdlog.h>

#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/mediation_privileges.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "actors/mediation/sandbox_fixed_paths.hpp"
#include "actors/mediation/syscall_mediator.hpp"
#include "platform/linux/pidfd.hpp"

namespace castellan {

/// An open as the mediator acts on it: its arguments copied once, the path
/// made absolute as the sandbox sees it.
struct syscall_mediator::open_request {
  std::string path;   ///< absolute, inside the worker's root
  uint64_t flags = 0; ///< the caller's open flags (the low 32 bits)
  uint64_t mode = 0;  ///< the caller's mode for a creation
  /// What the supervisor raises to resolve and reopen a path in the
  /// caller's own /proc entry (0 anywhere else).
  uint64_t own_entry_caps = 0;
};

namespace {

namespace pol = policy;
using namespace mediation;

/// An open's arguments, before its path is copied.
struct open_arguments {
  int dirfd = AT_FDCWD;
  uint64_t path_addr = 0;
  uint64_t flags = 0;
  uint64_t mode = 0;
};

/// Reads the arguments of whichever of open, creat, openat and openat2 `c`
/// is (openat2's open_how copied out of the caller). 0 or the errno the
/// call fails with.
int read_open_arguments(syscall_mediator::call& c, open_arguments& out) {
  const auto& n = c.n;
  switch (n.nr) {
#ifdef SYS_open
  case SYS_open:
    out.path_addr = n.args[0];
    out.flags = n.args[1];
    out.mode = n.args[2];
    break;
#endif
#ifdef SYS_creat
  case SYS_creat:
    out.path_addr = n.args[0];
    out.flags = O_CREAT | O_WRONLY | O_TRUNC;
    out.mode = n.args[1];
    break;
#endif
  case SYS_openat:
    out.dirfd = static_cast<int>(n.args[0]);
    out.path_addr = n.args[1];
    out.flags = n.args[2];
    out.mode = n.args[3];
    break;
  default: { // openat2
    out.dirfd = static_cast<int>(n.args[0]);
    out.path_addr = n.args[1];
    open_how how{};
    if (n.args[3] < sizeof how)
      return EINVAL;
    if (auto ok = c.caller.read(n.args[2], &how, sizeof how); !ok)
      return EFAULT;
    if (how.resolve != 0)
      // The caller's own resolution rules would have to be combined
      // with RESOLVE_IN_ROOT; not supported: callers fall back to openat.
      return ENOSYS;
    out.flags = how.flags;
    out.mode = how.mode;
    break;
  }
  }
  out.flags &= 0xFFFFFFFFu;
  return 0;
}

/// The Landlock rights an open with `flags` needs on the object it opens, as
/// the kernel asks them (READ_FILE or READ_DIR to read, WRITE_FILE to write,
/// TRUNCATE for O_TRUNC of an existing file; nothing for O_PATH).
uint64_t open_rights(uint64_t flags, bool dir) {
  if ((flags & O_PATH) != 0)
    return 0;
  const uint64_t acc = flags & O_ACCMODE;
  uint64_t rights = 0;
  if (acc == O_RDONLY || acc == O_RDWR)
    rights |= dir ? platform::landlock_fs::read_dir : platform::landlock_fs::read_file;
  if (acc == O_WRONLY || acc == O_RDWR)
    rights |= platform::landlock_fs::write_file;
  if ((flags & O_TRUNC) != 0)
    rights |= platform::landlock_fs::truncate;
  return rights;
}

/// The policy's permissions an open with `flags` exercises on an existing
/// object (a directory is read as read_dir).
pol::fs_access open_permissions(uint64_t flags, bool dir) {
  const int acc = static_cast<int>(flags & O_ACCMODE);
  const bool o_path = (flags & O_PATH) != 0;
  pol::fs_access perms = 0;
  if (o_path || acc == O_RDONLY)
    perms = pol::to_access(dir ? pol::fs_perm::read_dir : pol::fs_perm::read_file);
  else if (acc == O_WRONLY)
    perms = pol::to_access(pol::fs_perm::write_file);
  else
    perms = pol::to_access(pol::fs_perm::read_file) | pol::to_access(pol::fs_perm::write_file);
  if ((flags & O_TRUNC) != 0 && !o_path)
    perms |= pol::to_access(pol::fs_perm::truncate) | pol::to_access(pol::fs_perm::write_file);
  return perms;
}

bool is_harness_path(const std::string& path) {
  const std::string_view dir = sandbox_harness_dir;
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

/// Splits the path of a file to create into its parent directory and the
/// new name. EISDIR for a name that cannot be a regular file (a trailing
/// slash, ".", ".."), else 0.
int split_new_name(const std::string& abs, std::string& parent, std::string& name) {
  parent = abs;
  while (parent.size() > 1 && parent.back() == '/')
    parent.pop_back();
  if (parent.size() != abs.size())
    return EISDIR;
  const auto slash = parent.find_last_of('/');
  name = parent.substr(slash + 1);
  parent = slash == 0 ? "/" : parent.substr(0, slash);
  if (name.empty() || name == "." || name == "..")
    return EISDIR;
  return 0;
}

/// "/proc/self/fd/<fd>": reopening through it opens the very object `fd`
/// names, with new flags and the permission checks made again.
std::string reopen_path(int fd) {
  return "/proc/self/fd/" + std::to_string(fd);
}

} // namespace

void syscall_mediator::decide_open(mediated_worker& w, call& c, mediation_result& r) {
  open_request o;
  if (!copy_open_request(c, o))
    return;
  for (int attempt = 0; attempt < 4; ++attempt) {
    unique_fd opath;
    {
      mediation::raised_capabilities step(o.own_entry_caps);
      opath.reset(open_in_root(w.root.get(), o.path,
                               O_PATH | O_CLOEXEC | (o.flags & (O_NOFOLLOW | O_DIRECTORY))));
    }
    if (!opath && errno == ENOENT && (o.flags & O_CREAT) != 0) {
      if (create_for_open(w, c, o))
        return;
      continue; // created by someone else meanwhile: open the existing file
    }
    if (!opath)
      return c.fail(errno);
    return open_existing(w, c, r, o, std::move(opath));
  }
  c.fail(EAGAIN); // the name kept appearing and disappearing
}

bool syscall_mediator::copy_open_request(call& c, open_request& o) {
  auto fail = [&](int err) {
    c.fail(err);
    return false;
  };
  open_arguments a;
  if (int err = read_open_arguments(c, a); err != 0)
    return fail(err);
  o.flags = a.flags;
  o.mode = a.mode;
  auto path = c.caller.read_string(a.path_addr, max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (path->empty())
    return fail(ENOENT);
  // What was read may be acted upon only while the caller still waits.
  if (!c.still_waiting()) {
    c.gone();
    return false;
  }
  if ((o.flags & O_TMPFILE) == O_TMPFILE)
    return fail(EOPNOTSUPP);
  if (int err = absolute(c.caller, a.dirfd, *path, o.path); err != 0)
    return fail(err);
  // Another process's /proc entry is never opened for a worker, whatever
  // the policy says (its own process's is).
  if (int err = other_process_entry(c.caller, o.path); err != 0)
    return fail(err);
  // Its own entry: the kernel lets a process into it whether or not it is
  // dumpable (a non-dumpable process's entry is root's: its fd directory,
  // its maps). The supervisor reaches it for the caller with CAP_SYS_PTRACE
  // and, to read, CAP_DAC_READ_SEARCH, for the resolution and the reopen
  // only; a write there gets no capability.
  const bool read_only = (o.flags & O_ACCMODE) == O_RDONLY && (o.flags & (O_TRUNC | O_CREAT)) == 0;
  o.own_entry_caps = own_process_entry(c.caller, o.path)
                         ? mediation::ptrace_cap() | (read_only ? mediation::read_search_cap() : 0)
                         : 0;
  return true;
}

bool syscall_mediator::create_for_open(mediated_worker& w, call& c, const open_request& o) {
  auto fail = [&](int err) {
    c.fail(err);
    return true;
  };
  // Decided on the resolved parent and the new name, then created
  // exclusively in that very directory.
  std::string parent;
  std::string name;
  if (int err = split_new_name(o.path, parent, name); err != 0)
    return fail(err);
  unique_fd dir(open_in_root(w.root.get(), parent, O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!dir)
    return fail(errno);
  std::string canon_parent;
  if (int err = fd_path(dir.get(), canon_parent); err != 0)
    return fail(err);
  const std::string target = join(canon_parent, name);
  if (int err = other_process_object(c.caller, dir.get(), target); err != 0)
    return fail(err);
  pol::fs_access perms = pol::to_access(pol::fs_perm::make_reg);
  if ((o.flags & O_ACCMODE) != O_RDONLY)
    perms |= pol::to_access(pol::fs_perm::write_file);
  const auto d = rules_only(policy_->check_fs(target, perms));
  if (d.verdict == pol::action::deny) {
    deny(c, target, d);
    return true;
  }
  // The worker's Landlock rights (emulated): MAKE_REG in the directory,
  // and the open of the new file itself.
  if ((platform::landlock_fs::make_reg & ~landlock_rights(canon_parent)) != 0 ||
      (open_rights(o.flags & ~static_cast<uint64_t>(O_TRUNC), false) & ~landlock_rights(target)) !=
          0)
    return fail(EACCES);
  const uint64_t create_flags =
      (o.flags & ~static_cast<uint64_t>(O_CLOEXEC)) | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
  if (!private_fs())
    return fail(ENOMEM);
  use_umask_of(w, c.caller);
  unique_fd created(::openat(dir.get(), name.c_str(), static_cast<int>(create_flags),
                             static_cast<mode_t>(o.mode & 07777)));
  if (!created) {
    if (errno == EEXIST && (o.flags & O_EXCL) == 0)
      return false;
    return fail(errno);
  }
  if (!answer_with_fd(w, c, created.get(), (o.flags & O_CLOEXEC) != 0)) {
    c.gone();
    return true;
  }
  if (d.verdict == pol::action::warn)
    warn(c, target, d);
  return true;
}

void syscall_mediator::open_existing(mediated_worker& w, call& c, mediation_result& r,
                                     const open_request& o, unique_fd opath) {
  const bool o_path = (o.flags & O_PATH) != 0;
  if ((o.flags & O_CREAT) != 0 && (o.flags & O_EXCL) != 0)
    return c.fail(EEXIST);
  struct stat st;
  if (::fstat(opath.get(), &st) != 0)
    return c.fail(errno);
  if (S_ISLNK(st.st_mode) && !o_path)
    return c.fail(ELOOP); // O_NOFOLLOW on a symlink
  std::string canon;
  if (int err = fd_path(opath.get(), canon); err != 0)
    return c.fail(err);
  // Checked again on what was resolved: a symlink may lead there.
  if (int err = other_process_object(c.caller, opath.get(), canon); err != 0)
    return c.fail(err);
  const bool dir = S_ISDIR(st.st_mode);
  const pol::fs_access perms = open_permissions(o.flags, dir);
  // Reads are optimistic: a denied one is not an errno the code could
  // catch and probe with, it ends the worker. The check itself costs a
  // trie walk (well under a microsecond), so it runs before the answer:
  // the worker never holds the denied file, not even for an instant.
  const bool optimistic = (perms & ~read_only_perms) == 0;
  pol::decision d = rules_only(policy_->check_fs(canon, perms));
  // The harness is castellan's, not the policy's: it may always be read.
  if (optimistic && is_harness_path(canon))
    d = pol::decision{pol::action::allow, pol::decision_source::default_action, -1, "harness"};
  if (d.verdict == pol::action::deny && !optimistic)
    return deny(c, canon, d);
  // The worker's own open passes its Landlock domain; the supervisor's is
  // not in it, so it applies the worker's rules itself (emulated by path):
  // a missing right is the kernel's own EACCES, never a kill.
  if (!o_path && (open_rights(o.flags, dir) & ~landlock_rights(canon)) != 0)
    return c.fail(EACCES);
  if (d.verdict == pol::action::deny)
    return end_for_denied_read(w, c, r, o, opath.get(), canon, d);
  unique_fd real;
  if (o_path) {
    real = std::move(opath);
  } else {
    real = reopen_for_caller(o, opath.get(), S_ISFIFO(st.st_mode));
    if (!real)
      return c.fail(errno);
  }
  if (!answer_with_fd(w, c, real.get(), (o.flags & O_CLOEXEC) != 0))
    return c.gone();
  if (d.verdict == pol::action::warn)
    warn(c, canon, d);
}

void syscall_mediator::end_for_denied_read(mediated_worker& w, call& c, mediation_result& r,
                                           const open_request& o, int opath,
                                           const std::string& canon, const policy::decision& d) {
  // A read the kernel refuses by itself (a path covered in the root, DAC)
  // reveals nothing: it ends with the kernel's errno, as without the
  // supervisor. Only a read that would succeed ends the worker; the probe's
  // fd is closed here, never injected.
  if ((o.flags & O_PATH) == 0) {
    unique_fd probe(
        ::open(reopen_path(opath).c_str(),
               static_cast<int>(O_RDONLY | O_CLOEXEC | O_NONBLOCK | (o.flags & O_DIRECTORY))));
    if (!probe)
      return c.fail(errno);
  }
  {
    mediation::raised_capabilities step(mediation::kill_cap());
    (void)platform::pidfd_signal(w.pidfd, SIGKILL);
  }
  w.killed = true;
  (void)w.listener->respond_error(c.n.id, EACCES);
  r.what = mediation_result::outcome::kill;
  r.event = make_event(event_kind::optimistic_violation, c.name, canon, d.verdict, d.pointer,
                       c.n.pid);
  r.event.decision = event_decision::kill;
}

unique_fd syscall_mediator::reopen_for_caller(const open_request& o, int opath, bool fifo) {
  // Reopen the object already resolved: the caller's flags apply to it,
  // and the DAC and mount checks are made again as the worker.
  uint64_t reopen =
      (o.flags & ~static_cast<uint64_t>(O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) |
      O_CLOEXEC;
  if (fifo)
    reopen |= O_NONBLOCK; // never wait for a peer on this thread
  unique_fd real;
  {
    mediation::raised_capabilities step(o.own_entry_caps);
    real.reset(::open(reopen_path(opath).c_str(), static_cast<int>(reopen)));
  }
  if (!real)
    return real; // errno is the open's
  if (fifo && (o.flags & O_NONBLOCK) == 0) {
    const int fl = ::fcntl(real.get(), F_GETFL);
    if (fl >= 0)
      (void)::fcntl(real.get(), F_SETFL, fl & ~O_NONBLOCK);
  }
  return real;
}

bool syscall_mediator::answer_with_fd(mediated_worker& w, const call& c, int fd, bool cloexec) {
  auto& listener = *w.listener;
  if (!one_step_fds_)
    return static_cast<bool>(listener.respond_with_fd(c.n.id, fd, cloexec));
  auto sent = listener.send_fd(c.n.id, fd, cloexec);
  if (!sent && sent.error().code == EINPROGRESS) {
    // The caller's open returned 0: it must not run on believing that is
    // the file. Its whole sandbox goes (the pool reports worker_lost).
    spdlog::error("pool: worker {}: {}; killing the worker", w.id, sent.error().describe());
    mediation::raised_capabilities step(mediation::kill_cap());
    (void)platform::pidfd_signal(w.pidfd, SIGKILL);
    w.killed = true;
  }
  return static_cast<bool>(sent);
}

} // namespace castellan
