/// @file mediated_paths.cpp
/// The calls that change the tree without opening: unlink, rmdir, mkdir,
/// mknod, symlink, link, rename, truncate (and their *at forms), decided by
/// syscall_mediator and performed by the supervisor itself.
///
/// Why performed here and not answered "continue": the kernel would read the
/// caller's paths again, and another thread of the caller could have
/// changed them in between. So each path is copied once; its parent
/// directory is resolved in the worker's root (openat2 with RESOLVE_IN_ROOT
/// | RESOLVE_NO_MAGICLINKS: `..` and absolute symlinks stay inside, magic
/// links are refused) and held open; the decision is taken on that
/// directory's path plus the last component; and the call is made on that
/// directory fd with the last component alone, which the kernel looks up
/// without following it (unlink and rename act on a symlink itself). The
/// thread acts as the worker: its fsuid/fsgid (DAC, the owner of what it
/// creates, no file-system capabilities, hence no CAP_MKNOD), the caller's
/// umask, the worker's mounts (a read-only bind answers EROFS). Errors the
/// kernel reports before any permission check (a missing name, an existing
/// one, a trailing slash on a file) are answered first, as the kernel would.

#include <fcntl.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "actors/policy/engine/path.hpp"

namespace castellan {

namespace {

namespace pol = policy;
using namespace mediation;
using verdict = syscall_mediator::change_verdict;

/// The make_* permission for an object of type `mode`.
pol::fs_access make_perm(mode_t mode) {
  switch (mode & S_IFMT) {
  case S_IFDIR:
    return pol::to_access(pol::fs_perm::make_dir);
  case S_IFLNK:
    return pol::to_access(pol::fs_perm::make_sym);
  case S_IFIFO:
    return pol::to_access(pol::fs_perm::make_fifo);
  case S_IFSOCK:
    return pol::to_access(pol::fs_perm::make_sock);
  case S_IFCHR:
    return pol::to_access(pol::fs_perm::make_char);
  case S_IFBLK:
    return pol::to_access(pol::fs_perm::make_block);
  default:
    return pol::to_access(pol::fs_perm::make_reg);
  }
}

pol::fs_access remove_perm(mode_t mode) {
  return pol::to_access(S_ISDIR(mode) ? pol::fs_perm::remove_dir : pol::fs_perm::remove_file);
}

/// The verdict that answers a call decided on several paths: a rule's deny
/// first, then the static layers' refusal, then a warning.
const verdict& strongest(std::initializer_list<const verdict*> all) {
  static const verdict allow{};
  for (auto what : {verdict::kind::deny, verdict::kind::refuse, verdict::kind::warn})
    for (const verdict* v : all)
      if (v->what == what)
        return *v;
  return allow;
}

std::string dir_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

/// Copies the path at `addr`; 0 or an errno.
int copy_path(mediated_caller& who, uint64_t addr, std::string& out) {
  auto s = who.read_string(addr, max_path);
  if (!s)
    return s.error().code != 0 ? s.error().code : EFAULT;
  out = std::move(*s);
  return 0;
}

/// The positions of `pattern` reachable after matching `path` from its
/// start (`**` absorbs any number of components; position `size()` means
/// the path itself is covered, and so is everything beneath it).
std::vector<char> reachable(const std::vector<std::string>& pattern,
                            const pol::path_components& path) {
  const std::size_t m = pattern.size();
  std::vector<char> cur(m + 1, 0);
  std::vector<char> next(m + 1, 0);
  auto close = [&](std::vector<char>& s) {
    for (std::size_t i = 0; i < m; ++i)
      if (s[i] && pattern[i] == "**")
        s[i + 1] = 1;
  };
  cur[0] = 1;
  close(cur);
  for (std::size_t k = 0; k < path.size(); ++k) {
    std::fill(next.begin(), next.end(), 0);
    for (std::size_t i = 0; i < m; ++i) {
      if (!cur[i])
        continue;
      if (pattern[i] == "**")
        next[i] = 1;
      else if (pol::match_component(pattern[i], path[k]))
        next[i + 1] = 1;
    }
    if (cur[m])
      next[m] = 1;
    close(next);
    cur.swap(next);
  }
  return cur;
}

} // namespace

syscall_mediator::change_verdict syscall_mediator::check_move(const std::string& from,
                                                              const std::string& to, bool dir,
                                                              bool beneath) const {
  change_verdict v;
  v.target = from;
  // The object keeps its inode under the new name: it must not gain a
  // permission a rule withholds (or reports) at its old place.
  const pol::fs_access perms = decided_fs_ & (dir ? pol::fs_access_all : file_perms);
  for (unsigned bit = 0; bit < pol::fs_perm_count; ++bit) {
    const pol::fs_access p = pol::fs_access{1} << bit;
    if ((perms & p) == 0)
      continue;
    const pol::decision old_d = rules_only(policy_->check_fs(from, p));
    if (old_d.verdict == pol::action::allow)
      continue;
    const pol::decision new_d = rules_only(policy_->check_fs(to, p));
    if (old_d.verdict == pol::action::deny && new_d.verdict != pol::action::deny) {
      v.what = change_verdict::kind::deny;
      v.decision = old_d;
      return v;
    }
    if (old_d.verdict == pol::action::warn && new_d.verdict == pol::action::allow &&
        v.what == change_verdict::kind::allow) {
      v.what = change_verdict::kind::warn;
      v.decision = old_d;
    }
  }
  if (!beneath)
    return v;
  // What lies beneath moves along: a decided rule that reaches below `from`
  // and not equally below `to` would lose its hold on it.
  pol::path_components pf;
  pol::path_components pt;
  if (!pf.assign(from) || !pt.assign(to))
    return v;
  for (std::size_t i = 0; i < decided_rules_.size(); ++i) {
    const auto& rule = decided_rules_[i];
    const std::size_t m = rule.parts.size();
    const auto at_from = reachable(rule.parts, pf);
    const auto at_to = reachable(rule.parts, pt);
    if (at_to[m])
      continue; // everything beneath `to` is covered anyway
    bool lost = false;
    for (std::size_t k = 0; k < m && !lost; ++k)
      lost = at_from[k] && !at_to[k];
    if (!lost)
      continue;
    const pol::decision d{rule.verdict, pol::decision_source::rule, static_cast<int32_t>(i),
                          rule.pointer};
    if (rule.verdict == pol::action::deny) {
      v.what = change_verdict::kind::deny;
      v.decision = d;
      return v;
    }
    if (v.what == change_verdict::kind::allow) {
      v.what = change_verdict::kind::warn;
      v.decision = d;
    }
  }
  return v;
}

void syscall_mediator::decide_remove(mediated_worker& w, call& c, mediation_result&) {
  const auto& n = c.n;
  int dirfd = AT_FDCWD;
  uint64_t addr = n.args[0];
  uint64_t flags = 0;
  switch (n.nr) {
#ifdef SYS_rmdir
  case SYS_rmdir:
    flags = AT_REMOVEDIR;
    break;
#endif
  case SYS_unlinkat:
    dirfd = static_cast<int>(n.args[0]);
    addr = n.args[1];
    flags = n.args[2] & 0xFFFFFFFFu;
    break;
  default: // unlink
    break;
  }
  if ((flags & ~static_cast<uint64_t>(AT_REMOVEDIR)) != 0)
    return c.fail(EINVAL);
  const bool rmdir = flags != 0;
  std::string path;
  if (int err = copy_path(c.caller, addr, path); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  located_name at;
  if (int err = locate(w.root.get(), c.caller, dirfd, path, at); err != 0)
    return c.fail(err);
  switch (at.what) {
  case located_name::kind::root:
    return c.fail(rmdir ? EBUSY : EISDIR);
  case located_name::kind::dot:
    return c.fail(rmdir ? EINVAL : EISDIR);
  case located_name::kind::dotdot:
    return c.fail(rmdir ? ENOTEMPTY : EISDIR);
  default:
    break;
  }
  // A read-only mount answers EROFS before anything else is looked at; it
  // is only asked where the answer would otherwise be an error (the call
  // itself reports EROFS on the way to success).
  const int parent = at.parent.get();
  auto fail = [&](int err) { c.fail(on_read_only_mount(parent) ? EROFS : err); };
  struct stat st;
  if (::fstatat(parent, at.name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0)
    return fail(errno);
  if (!rmdir && at.trailing_slash)
    return fail(S_ISDIR(st.st_mode) ? EISDIR : ENOTDIR);
  // The permission depends on the call, not on what the name holds now:
  // unlink never removes a directory, rmdir nothing else.
  const auto v = check_change(
      at.path, pol::to_access(rmdir ? pol::fs_perm::remove_dir : pol::fs_perm::remove_file));
  if (v.what != verdict::kind::allow && v.what != verdict::kind::warn && on_read_only_mount(parent))
    return c.fail(EROFS);
  if (refused(c, v))
    return;
  const int rc = ::unlinkat(at.parent.get(), at.name.c_str(), rmdir ? AT_REMOVEDIR : 0);
  performed(c, rc == 0, v);
}

void syscall_mediator::decide_create(mediated_worker& w, call& c, mediation_result&) {
  const auto& n = c.n;
  enum class op { dir, node, symlink } what = op::dir;
  int dirfd = AT_FDCWD;
  uint64_t addr = n.args[0];
  uint64_t mode = 0;
  uint64_t dev = 0;
  uint64_t target_addr = 0;
  switch (n.nr) {
#ifdef SYS_mkdir
  case SYS_mkdir:
    mode = n.args[1];
    break;
#endif
  case SYS_mkdirat:
    dirfd = static_cast<int>(n.args[0]);
    addr = n.args[1];
    mode = n.args[2];
    break;
#ifdef SYS_mknod
  case SYS_mknod:
    what = op::node;
    mode = n.args[1];
    dev = n.args[2];
    break;
#endif
  case SYS_mknodat:
    what = op::node;
    dirfd = static_cast<int>(n.args[0]);
    addr = n.args[1];
    mode = n.args[2];
    dev = n.args[3];
    break;
#ifdef SYS_symlink
  case SYS_symlink:
    what = op::symlink;
    target_addr = n.args[0];
    addr = n.args[1];
    break;
#endif
  default: // symlinkat
    what = op::symlink;
    target_addr = n.args[0];
    dirfd = static_cast<int>(n.args[1]);
    addr = n.args[2];
    break;
  }
  mode &= 0xFFFFFFFFu;
  pol::fs_access perm = pol::to_access(pol::fs_perm::make_dir);
  if (what == op::node) {
    // The type is checked before the path is looked up (may_mknod).
    if ((mode & S_IFMT) == 0)
      mode |= S_IFREG;
    switch (mode & S_IFMT) {
    case S_IFREG:
    case S_IFCHR:
    case S_IFBLK:
    case S_IFIFO:
    case S_IFSOCK:
      break;
    case S_IFDIR:
      return c.fail(EPERM);
    default:
      return c.fail(EINVAL);
    }
    perm = make_perm(static_cast<mode_t>(mode));
  } else if (what == op::symlink) {
    perm = pol::to_access(pol::fs_perm::make_sym);
  }
  std::string link_target;
  if (what == op::symlink) {
    if (int err = copy_path(c.caller, target_addr, link_target); err != 0)
      return c.fail(err);
    if (link_target.empty())
      return c.fail(ENOENT);
  }
  std::string path;
  if (int err = copy_path(c.caller, addr, path); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  located_name at;
  // Only mkdir may create a name written with a trailing slash.
  if (int err = locate_new(w.root.get(), c.caller, dirfd, path, EEXIST, what == op::dir, at); err != 0)
    return c.fail(err);
  const auto v = check_change(at.path, perm);
  // EROFS comes before any permission check; the call itself reports it on
  // the way to success, so the mount is only asked before a refusal.
  if (v.what != verdict::kind::allow && v.what != verdict::kind::warn &&
      on_read_only_mount(at.parent.get()))
    return c.fail(EROFS);
  if (refused(c, v))
    return;
  int rc = 0;
  if (what == op::symlink) {
    rc = ::symlinkat(link_target.c_str(), at.parent.get(), at.name.c_str());
  } else {
    if (!private_fs())
      return c.fail(ENOMEM);
    use_umask_of(w, c.caller);
    rc = what == op::dir
             ? ::mkdirat(at.parent.get(), at.name.c_str(), static_cast<mode_t>(mode & 07777))
             : ::mknodat(at.parent.get(), at.name.c_str(), static_cast<mode_t>(mode),
                         static_cast<dev_t>(dev & 0xFFFFFFFFu));
  }
  performed(c, rc == 0, v);
}

void syscall_mediator::decide_link(mediated_worker& w, call& c, mediation_result&) {
  const auto& n = c.n;
  int old_dirfd = AT_FDCWD;
  int new_dirfd = AT_FDCWD;
  uint64_t old_addr = n.args[0];
  uint64_t new_addr = n.args[1];
  uint64_t flags = 0;
  if (n.nr == SYS_linkat) {
    old_dirfd = static_cast<int>(n.args[0]);
    old_addr = n.args[1];
    new_dirfd = static_cast<int>(n.args[2]);
    new_addr = n.args[3];
    flags = n.args[4] & 0xFFFFFFFFu;
  }
  if ((flags & ~static_cast<uint64_t>(AT_SYMLINK_FOLLOW | AT_EMPTY_PATH)) != 0)
    return c.fail(EINVAL);
  std::string old_raw;
  std::string new_raw;
  if (int err = copy_path(c.caller, old_addr, old_raw); err != 0)
    return c.fail(err);
  if (int err = copy_path(c.caller, new_addr, new_raw); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  // The existing object, held open: what is linked is what was decided.
  unique_fd object;
  if (old_raw.empty()) {
    if ((flags & AT_EMPTY_PATH) == 0)
      return c.fail(ENOENT);
    object.reset(c.caller.open_at("fd/" + std::to_string(old_dirfd), O_PATH));
    if (!object)
      return c.fail(errno == ENOENT ? EBADF : errno);
  } else {
    std::string abs;
    if (int err = absolute(c.caller, old_dirfd, old_raw, abs); err != 0)
      return c.fail(err);
    const uint64_t follow = (flags & AT_SYMLINK_FOLLOW) != 0 ? 0 : O_NOFOLLOW;
    object.reset(open_in_root(w.root.get(), abs, O_PATH | O_CLOEXEC | follow));
    if (!object)
      return c.fail(errno);
  }
  std::string old_path;
  if (int err = fd_path(object.get(), old_path); err != 0)
    return c.fail(err); // ENOENT: an unlinked file (an O_TMPFILE) is not linked by name
  if (int err = other_process_object(c.caller, object.get(), old_path); err != 0)
    return c.fail(err);
  struct stat st;
  if (::fstat(object.get(), &st) != 0)
    return c.fail(errno);
  if (S_ISDIR(st.st_mode))
    return c.fail(EPERM);
  located_name at;
  if (int err = locate_new(w.root.get(), c.caller, new_dirfd, new_raw, EEXIST, false, at); err != 0)
    return c.fail(err);
  if (on_read_only_mount(at.parent.get()))
    return c.fail(EROFS);
  if (!same_mount(object.get(), at.parent.get()))
    return c.fail(EXDEV);
  const bool reparent = dir_of(old_path) != at.parent_path;
  const pol::fs_access refer = reparent ? pol::to_access(pol::fs_perm::refer) : 0;
  const verdict at_new = check_change(at.path, make_perm(st.st_mode) | refer);
  const verdict at_old = refer != 0 ? check_change(old_path, refer) : verdict{};
  const verdict moved = check_move(old_path, at.path, false, false);
  const verdict& v = strongest({&at_new, &at_old, &moved});
  if (refused(c, v))
    return;
  // Through our own magic link to the object: the kernel links that inode
  // (a symlink itself when it was not followed), never a name looked up again.
  const std::string source = "/proc/self/fd/" + std::to_string(object.get());
  const int rc =
    ::linkat(AT_FDCWD, source.c_str(), at.parent.get(), at.name.c_str(), AT_SYMLINK_FOLLOW);
  performed(c, rc == 0, v);
}

void syscall_mediator::decide_rename(mediated_worker& w, call& c, mediation_result&) {
  const auto& n = c.n;
  int old_dirfd = AT_FDCWD;
  int new_dirfd = AT_FDCWD;
  uint64_t old_addr = n.args[0];
  uint64_t new_addr = n.args[1];
  uint64_t flags = 0;
  if (n.nr != SYS_renameat2
#ifdef SYS_renameat
      && n.nr != SYS_renameat
#endif
  ) {
    // rename(old, new)
  } else {
    old_dirfd = static_cast<int>(n.args[0]);
    old_addr = n.args[1];
    new_dirfd = static_cast<int>(n.args[2]);
    new_addr = n.args[3];
    if (n.nr == SYS_renameat2)
      flags = n.args[4] & 0xFFFFFFFFu;
  }
  if ((flags & ~static_cast<uint64_t>(RENAME_NOREPLACE | RENAME_EXCHANGE | RENAME_WHITEOUT)) != 0)
    return c.fail(EINVAL);
  const bool exchange = (flags & RENAME_EXCHANGE) != 0;
  if (exchange && (flags & (RENAME_NOREPLACE | RENAME_WHITEOUT)) != 0)
    return c.fail(EINVAL);
  if ((flags & RENAME_WHITEOUT) != 0)
    return c.fail(EPERM); // needs CAP_MKNOD, which the worker does not have
  std::string old_raw;
  std::string new_raw;
  if (int err = copy_path(c.caller, old_addr, old_raw); err != 0)
    return c.fail(err);
  if (int err = copy_path(c.caller, new_addr, new_raw); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  located_name from;
  located_name to;
  if (int err = locate(w.root.get(), c.caller, old_dirfd, old_raw, from); err != 0)
    return c.fail(err);
  if (int err = locate(w.root.get(), c.caller, new_dirfd, new_raw, to); err != 0)
    return c.fail(err);
  if (from.what != located_name::kind::normal)
    return c.fail(EBUSY);
  if (to.what != located_name::kind::normal)
    return c.fail((flags & RENAME_NOREPLACE) != 0 ? EEXIST : EBUSY);
  if (!same_mount(from.parent.get(), to.parent.get()))
    return c.fail(EXDEV);
  if (on_read_only_mount(from.parent.get()))
    return c.fail(EROFS);
  struct stat ost;
  if (::fstatat(from.parent.get(), from.name.c_str(), &ost, AT_SYMLINK_NOFOLLOW) != 0)
    return c.fail(errno);
  struct stat nst;
  const bool target_exists =
      ::fstatat(to.parent.get(), to.name.c_str(), &nst, AT_SYMLINK_NOFOLLOW) == 0;
  if (!target_exists && errno != ENOENT)
    return c.fail(errno);
  if (exchange && !target_exists)
    return c.fail(ENOENT);
  if ((flags & RENAME_NOREPLACE) != 0 && target_exists)
    return c.fail(EEXIST);
  const bool old_dir = S_ISDIR(ost.st_mode);
  const bool new_dir = target_exists && S_ISDIR(nst.st_mode);
  if (exchange) {
    if ((!new_dir && to.trailing_slash) || (!old_dir && from.trailing_slash))
      return c.fail(ENOTDIR);
  } else if (!old_dir && (from.trailing_slash || to.trailing_slash)) {
    return c.fail(ENOTDIR);
  }
  // What changes where: the old name goes (and, for an exchange, receives
  // the other object), the new name receives the object (and loses what it
  // held). Across directories both ends need `refer`.
  const bool reparent = from.parent_path != to.parent_path;
  const pol::fs_access refer = reparent ? pol::to_access(pol::fs_perm::refer) : 0;
  pol::fs_access at_old = remove_perm(ost.st_mode) | refer;
  pol::fs_access at_new = make_perm(ost.st_mode) | refer;
  if (target_exists)
    at_new |= remove_perm(nst.st_mode);
  if (exchange)
    at_old |= make_perm(nst.st_mode);
  const verdict v_old = check_change(from.path, at_old);
  const verdict v_new = check_change(to.path, at_new);
  // The object must not gain what a rule withholds at its old place, and
  // whatever lies beneath it moves along. What lies beneath is checked
  // whatever the name holds now: another thread could put a directory
  // there before the kernel acts.
  const verdict moved = check_move(from.path, to.path, old_dir, true);
  const verdict moved_back = exchange ? check_move(to.path, from.path, new_dir, true) : verdict{};
  const verdict& v = strongest({&v_old, &v_new, &moved, &moved_back});
  if (refused(c, v))
    return;
  const long rc = ::syscall(SYS_renameat2, from.parent.get(), from.name.c_str(), to.parent.get(),
                            to.name.c_str(), static_cast<unsigned>(flags));
  performed(c, rc == 0, v);
}

void syscall_mediator::decide_truncate(mediated_worker& w, call& c, mediation_result&) {
  const auto& n = c.n;
  const auto length = static_cast<int64_t>(n.args[1]);
  if (length < 0)
    return c.fail(EINVAL);
  std::string raw;
  if (int err = copy_path(c.caller, n.args[0], raw); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  if (raw.empty())
    return c.fail(ENOENT);
  std::string abs;
  if (int err = absolute(c.caller, AT_FDCWD, raw, abs); err != 0)
    return c.fail(err);
  // truncate follows symlinks: resolve them all, inside the root.
  unique_fd object(open_in_root(w.root.get(), abs, O_PATH | O_CLOEXEC));
  if (!object)
    return c.fail(errno);
  struct stat st;
  if (::fstat(object.get(), &st) != 0)
    return c.fail(errno);
  if (S_ISDIR(st.st_mode))
    return c.fail(EISDIR);
  if (!S_ISREG(st.st_mode))
    return c.fail(EINVAL);
  if (on_read_only_mount(object.get()))
    return c.fail(EROFS);
  std::string canon;
  if (int err = fd_path(object.get(), canon); err != 0)
    return c.fail(err);
  if (int err = other_process_object(c.caller, object.get(), canon); err != 0)
    return c.fail(err);
  const auto v = check_change(canon, pol::to_access(pol::fs_perm::truncate) |
                                         pol::to_access(pol::fs_perm::write_file));
  if (refused(c, v))
    return;
  // truncate(2) through our magic link truncates that very inode, with the
  // kernel's own checks (write permission as the worker, EROFS, EPERM for
  // an append-only file) and without an open.
  const std::string source = "/proc/self/fd/" + std::to_string(object.get());
  const int rc = ::truncate(source.c_str(), static_cast<off_t>(length));
  performed(c, rc == 0, v);
}

} // namespace castellan
