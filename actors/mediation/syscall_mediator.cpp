#include "actors/mediation/syscall_mediator.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/policy/engine/path.hpp"
#include "actors/mediation/mediation_privileges.hpp"
#include "actors/mediation/mediation_support.hpp"
#include "actors/mediation/network_layers.hpp"
#include "actors/mediation/sandbox_fixed_paths.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/linux/process_memory.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;
namespace pol = policy;
using namespace mediation;

constexpr pol::fs_access read_only_perms =
    pol::to_access(pol::fs_perm::read_file) | pol::to_access(pol::fs_perm::read_dir);

/// The permissions that apply to a file itself (as opposed to a directory's
/// entries): what a hard link or a renamed file carries with it.
constexpr pol::fs_access file_perms =
    pol::to_access(pol::fs_perm::execute) | pol::to_access(pol::fs_perm::write_file) |
    pol::to_access(pol::fs_perm::read_file) | pol::to_access(pol::fs_perm::truncate) |
    pol::to_access(pol::fs_perm::ioctl_dev);

constexpr pol::fs_access refer_perm = pol::to_access(pol::fs_perm::refer);

/// The interpreter a script at `path` (inside the worker's root) names on
/// its #! line, as the kernel reads it (the first line of at most the first
/// 256 bytes, the word after "#!"); "" for anything else. This thread reads
/// as the supervisor, so it reads only what the kernel would: a regular
/// file with an execute bit (the kernel runs nothing else), outside /proc
/// (another process's entries), opened without waiting.
std::string script_interpreter(int root, const std::string& path) {
  unique_fd opath(open_in_root(root, path, O_PATH | O_CLOEXEC));
  struct stat st;
  if (!opath || ::fstat(opath.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
      (st.st_mode & 0111) == 0)
    return {};
  std::string where;
  if (fd_path(opath.get(), where) != 0 || where == "/proc" || where.rfind("/proc/", 0) == 0)
    return {};
  const std::string self = "/proc/self/fd/" + std::to_string(opath.get());
  unique_fd file(::open(self.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC));
  if (!file)
    return {};
  char buf[256];
  const ssize_t n = ::pread(file.get(), buf, sizeof buf, 0);
  if (n < 3 || buf[0] != '#' || buf[1] != '!')
    return {};
  std::string_view line(buf + 2, static_cast<std::size_t>(n) - 2);
  line = line.substr(0, line.find('\n'));
  const auto start = line.find_first_not_of(" \t");
  if (start == std::string_view::npos)
    return {};
  line = line.substr(start);
  return std::string(line.substr(0, line.find_first_of(" \t")));
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

bool is_harness_path(const std::string& path) {
  const std::string_view dir = sandbox_harness_dir;
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
}

/// A deny rule on the whole tree is what the defaults and the static layers
/// already do; a deny inside it carves out of what is granted, and a warn
/// must be reported: only the supervisor can decide those.
bool is_decided(const pol::fs_rule& rule) {
  if (rule.verdict == pol::action::warn)
    return true;
  return rule.verdict == pol::action::deny && rule.path != "/" && rule.path != "/**";
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

mediation_context make_mediation_context(const platform::landlock_spec* landlock,
                                         uint16_t relay_port) {
  mediation_context ctx;
  ctx.relay_port = relay_port;
  if (landlock != nullptr && landlock->enabled) {
    // What the worker's kernel enforces: the rights its ruleset handles
    // that this kernel's ABI knows (best effort drops the others, and the
    // worker then has them).
    const uint64_t handled =
        landlock->handled_fs & platform::landlock_fs_rights_of_abi(platform::landlock_abi());
    ctx.landlock = handled != 0;
    ctx.landlock_handled = handled;
    ctx.landlock_paths = landlock->paths;
  }
  return ctx;
}

syscall_mediator::syscall_mediator(std::shared_ptr<const pol::compiled_policy> policy,
                                   mediation_context context)
    : context_(std::move(context)) {
  set_policy(std::move(policy));
}

void syscall_mediator::set_policy(std::shared_ptr<const pol::compiled_policy> policy) {
  policy_ = std::move(policy);
  decided_fs_ = 0;
  decided_rules_.clear();
  const auto& doc = policy_->document();
  decided_net_ = mediates_net(doc);
  if (doc.effective_fs_default() == pol::action::warn)
    decided_fs_ = pol::fs_access_all;
  for (std::size_t i = 0; i < doc.fs_rules.size(); ++i) {
    const auto& rule = doc.fs_rules[i];
    if (!is_decided(rule))
      continue;
    decided_fs_ |= rule.perms;
    decided_rules_.push_back(
        {pol::pattern_components(rule.path), rule.verdict, "/fs/rules/" + std::to_string(i)});
  }
}

bool syscall_mediator::use_credentials_of(const mediated_worker& w) {
  // Per thread: DAC checks of the supervisor's own opens are made as the
  // worker's kernel uid/gid. Changing them is a step of the supervisor's
  // own (CAP_SETUID/CAP_SETGID, dropped right after).
  if (w.fsgid == current_fsgid_ && w.fsuid == current_fsuid_)
    return true;
  mediation::raised_capabilities step(mediation::setid_caps());
  if (w.fsgid != current_fsgid_) {
    ::setfsgid(w.fsgid);
    // setfsgid answers the previous id whether it changed or not: ask again.
    current_fsgid_ = static_cast<gid_t>(::setfsgid(static_cast<gid_t>(-1)));
  }
  if (w.fsuid != current_fsuid_) {
    ::setfsuid(w.fsuid);
    current_fsuid_ = static_cast<uid_t>(::setfsuid(static_cast<uid_t>(-1)));
  }
  return current_fsuid_ == w.fsuid && current_fsgid_ == w.fsgid;
}

bool syscall_mediator::without_groups() {
  // The event source drops them when it starts (raw setgroups: this thread
  // only); checked here, since a group would count in every DAC check.
  if (::getgroups(0, nullptr) == 0)
    return true;
  mediation::raised_capabilities step(mediation::setid_caps());
  return ::syscall(SYS_setgroups, 0, nullptr) == 0 && ::getgroups(0, nullptr) == 0;
}

bool syscall_mediator::private_fs() {
  if (private_fs_ == 0)
    // This thread's cwd and umask become its own: the rest of the
    // supervisor never sees a worker's umask or a cwd inside a sandbox.
    private_fs_ = ::unshare(CLONE_FS) == 0 ? 1 : -1;
  return private_fs_ == 1;
}

void syscall_mediator::use_umask_of(mediated_worker& w, mediation::mediated_caller& who) {
  // The kernel applies the creating thread's umask (or a default ACL of
  // the directory instead): give this thread the caller's, and pass the
  // caller's mode unchanged. Reading it costs a /proc/<tid>/status (several
  // microseconds); until some process of the sandbox calls umask(2), they
  // all have the one they inherited, read once.
  if (w.umask_changed || w.umask < 0) {
    const mode_t m = umask_of(who);
    if (!w.umask_changed)
      w.umask = static_cast<int>(m);
    ::umask(m);
    return;
  }
  ::umask(static_cast<mode_t>(w.umask));
}

bool syscall_mediator::act_as_worker(const mediated_worker& w) {
  // Raw system calls: this thread only (glibc's wrappers change every
  // thread). The saved uid stays 0, so act_as_self() can switch back; the
  // effective capabilities are gone meanwhile.
  if (::geteuid() == w.fsuid && ::getegid() == w.fsgid)
    return true;
  mediation::raised_capabilities step(mediation::setid_caps());
  if (::syscall(SYS_setresgid, -1, w.fsgid, -1) != 0)
    return false;
  if (::syscall(SYS_setresuid, -1, w.fsuid, -1) != 0) {
    (void)::syscall(SYS_setresgid, -1, 0, -1);
    return false;
  }
  current_fsuid_ = w.fsuid; // setresuid moved the fs ids along
  current_fsgid_ = w.fsgid;
  return true;
}

void syscall_mediator::act_as_self(const mediated_worker& w) {
  if (::geteuid() == ::getuid() && ::getegid() == ::getgid())
    return;
  // Back to the real uid: the kernel gives an effective uid 0 its whole
  // permitted set again, which this thread empties right after (it keeps
  // acting for the worker, as its fsuid/fsgid).
  (void)::syscall(SYS_setresuid, -1, ::getuid(), -1);
  (void)::syscall(SYS_setresgid, -1, ::getgid(), -1);
  current_fsuid_ = static_cast<uid_t>(-1);
  current_fsgid_ = static_cast<gid_t>(-1);
  // Neither can fail with the capabilities the thread has here; if one
  // did, it would go on acting for a worker as root.
  if (!use_credentials_of(w) || !mediation::drop_effective()) {
    spdlog::critical("pool event source: cannot act as the worker again");
    std::abort();
  }
}

uint64_t syscall_mediator::landlock_rights(const std::string& path) const {
  if (!context_.landlock)
    return platform::landlock_fs::all;
  uint64_t rights = ~context_.landlock_handled; // what the ruleset does not restrict
  for (const auto& rule : context_.landlock_paths) {
    const std::string& p = rule.path;
    const bool beneath =
        p == "/" || path == p ||
        (path.size() > p.size() && path.compare(0, p.size(), p) == 0 && path[p.size()] == '/');
    if (beneath)
      rights |= rule.access;
  }
  return rights;
}

syscall_mediator::change_verdict syscall_mediator::check_change(const std::string& target,
                                                                pol::fs_access perms) const {
  change_verdict v;
  v.target = target;
  for (unsigned bit = 0; bit < pol::fs_perm_count; ++bit) {
    const pol::fs_access p = pol::fs_access{1} << bit;
    if ((perms & p) == 0)
      continue;
    const pol::decision d = policy_->check_fs(target, p);
    if (d.verdict == pol::action::deny) {
      if (d.source != pol::decision_source::default_action) {
        v.what = change_verdict::kind::deny;
        v.decision = d;
        return v;
      }
    } else if (d.verdict == pol::action::warn && v.what == change_verdict::kind::allow) {
      v.what = change_verdict::kind::warn;
      v.decision = d;
    }
  }
  {
    // The worker's own call would pass its Landlock domain too; the
    // supervisor's call is not under that domain, so it asks the same
    // question itself, whatever the policy allows: rights on the entry for
    // what changes a file, rights on the parent for what changes the
    // directory (an emulation by path, see docs/security.md).
    const auto slash = target.find_last_of('/');
    const std::string parent = slash == 0 ? std::string("/") : target.substr(0, slash);
    const uint64_t on_file = perms & file_perms;
    const uint64_t on_dir = perms & ~file_perms;
    const uint64_t missing =
        (on_file & ~landlock_rights(target)) | (on_dir & ~landlock_rights(parent));
    if (missing != 0) {
      v.what = change_verdict::kind::refuse;
      // Landlock answers a missing REFER with EXDEV (so that mv copies).
      v.refuse_errno = missing == refer_perm ? EXDEV : EACCES;
    }
  }
  return v;
}

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

std::optional<mediation_result> syscall_mediator::handle(mediated_worker& w) {
  auto n = w.listener->receive();
  if (!n)
    return std::nullopt; // ENOENT: the caller is gone; EAGAIN/EINTR: nothing now
  mediation_result r;
  call c;
  c.n = *n;
  c.name = syscall_name(n->nr);
  c.received = clock_type::now();
  c.w = &w;
  c.r = &r;
  if (w.killed) {
    // The worker is being killed: nothing more may succeed.
    (void)w.listener->respond_error(n->id, EPERM);
    return std::nullopt;
  }
  c.caller = mediation::mediated_caller(n->pid, w.listener.get(), n->id);
  // From here until the answer this thread holds no effective capability:
  // what it does for the worker, the kernel checks as the worker's own.
  mediation::without_capabilities unprivileged;
  if (!unprivileged) {
    (void)w.listener->respond_error(n->id, EPERM);
    return std::nullopt;
  }
  if (!w.root) {
    // Every process of the sandbox shares this root (chroot, unshare and
    // setns are refused by the anti-escape filter). Taken through the
    // caller's validated /proc entry, never by number.
    // The ids are the caller's file-system ids from its status (the owner
    // of its /proc entry is root for a non-dumpable process).
    unique_fd root(c.caller.open_at("root", O_PATH | O_DIRECTORY));
    long ids[2] = {-1, -1};
    if (!root || c.caller.fs_ids(ids[0], ids[1]) != 0 || ids[0] < 0 || ids[1] < 0 ||
        !c.caller.still_waiting()) {
      (void)w.listener->respond_error(n->id, EACCES);
      return std::nullopt;
    }
    w.root = std::move(root);
    w.fsuid = static_cast<uid_t>(ids[0]);
    w.fsgid = static_cast<gid_t>(ids[1]);
  }
  if (!use_credentials_of(w) || !without_groups()) {
    // Never act for a worker with the supervisor's own file-system ids or
    // groups.
    (void)w.listener->respond_error(n->id, EPERM);
    return std::nullopt;
  }
  switch (n->nr) {
#ifdef SYS_open
  case SYS_open:
#endif
#ifdef SYS_creat
  case SYS_creat:
#endif
  case SYS_openat:
  case SYS_openat2:
    decide_open(w, c, r);
    break;
  case SYS_execve:
  case SYS_execveat:
    decide_exec(w, c, r);
    break;
#ifdef SYS_unlink
  case SYS_unlink:
#endif
#ifdef SYS_rmdir
  case SYS_rmdir:
#endif
  case SYS_unlinkat:
    decide_remove(w, c, r);
    break;
#ifdef SYS_mkdir
  case SYS_mkdir:
#endif
#ifdef SYS_mknod
  case SYS_mknod:
#endif
#ifdef SYS_symlink
  case SYS_symlink:
#endif
  case SYS_mkdirat:
  case SYS_mknodat:
  case SYS_symlinkat:
    decide_create(w, c, r);
    break;
#ifdef SYS_link
  case SYS_link:
#endif
  case SYS_linkat:
    decide_link(w, c, r);
    break;
#ifdef SYS_rename
  case SYS_rename:
#endif
#ifdef SYS_renameat
  case SYS_renameat:
#endif
  case SYS_renameat2:
    decide_rename(w, c, r);
    break;
  case SYS_truncate:
    decide_truncate(w, c, r);
    break;
  case SYS_connect:
  case SYS_bind:
    decide_connect_or_bind(w, c, r);
    break;
  case SYS_umask:
    // Not decided: only noted, so that the creations stop trusting the
    // umask read once (mediated_worker::umask).
    w.umask_changed = true;
    if (!w.listener->respond_continue(n->id))
      r.what = mediation_result::outcome::gone;
    break;
  case SYS_sendto:
  case SYS_sendmsg:
  case SYS_sendmmsg:
    decide_send(w, c, r);
    break;
  default:
    // Not a call this mediator asked for: refuse it rather than guess.
    (void)w.listener->respond_error(n->id, ENOSYS);
    r.what = mediation_result::outcome::gone;
    break;
  }
  r.latency_ns = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - c.received).count());
  if (r.what == mediation_result::outcome::gone)
    return std::nullopt;
  return r;
}

void syscall_mediator::send_denial_detail(const mediated_worker& w, const policy_event& e,
                                          int err) const {
  if (w.control_fd < 0)
    return;
  // Before the answer, so the harness finds it when the call returns. Never
  // blocks: a worker that does not read its socket only loses the details.
  std::string rec = "DENY";
  for (const std::string& part :
       {std::string(e.syscall), e.target, policy_->name(), e.rule, std::to_string(err)}) {
    rec.push_back('\0');
    rec += part;
  }
  (void)::send(w.control_fd, rec.data(), rec.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
}

void syscall_mediator::deny(call& c, const std::string& target, const pol::decision& d, int err) {
  c.r->what = mediation_result::outcome::deny;
  c.r->errno_value = err;
  c.r->event = make_event("syscall_denied", c.name, target, pol::action::deny, d.pointer, c.n.pid);
  send_denial_detail(*c.w, c.r->event, err);
  (void)c.listener().respond_error(c.n.id, err);
}

void syscall_mediator::warn(call& c, const std::string& target, const pol::decision& d) {
  if (c.r->what == mediation_result::outcome::gone)
    return;
  c.r->what = mediation_result::outcome::warn;
  c.r->event = make_event("policy_warning", c.name, target, pol::action::warn, d.pointer, c.n.pid);
}

void syscall_mediator::performed(call& c, bool ok, const change_verdict& v) {
  if (!ok)
    return c.fail(errno);
  c.succeed(0);
  if (v.what == change_verdict::kind::warn)
    warn(c, v.target, v.decision);
}

bool syscall_mediator::refused(call& c, const change_verdict& v) {
  switch (v.what) {
  case change_verdict::kind::deny:
    deny(c, v.target, v.decision);
    return true;
  case change_verdict::kind::refuse:
    c.fail(v.refuse_errno);
    return true;
  default:
    return false;
  }
}

void syscall_mediator::decide_open(mediated_worker& w, call& c, mediation_result& r) {
  auto& n = c.n;
  auto& listener = *w.listener;
  auto fail = [&](int err) { c.fail(err); };
  int dirfd = AT_FDCWD;
  uint64_t path_addr = 0;
  uint64_t flags = 0;
  uint64_t mode = 0;
  switch (n.nr) {
#ifdef SYS_open
  case SYS_open:
    path_addr = n.args[0];
    flags = n.args[1];
    mode = n.args[2];
    break;
#endif
#ifdef SYS_creat
  case SYS_creat:
    path_addr = n.args[0];
    flags = O_CREAT | O_WRONLY | O_TRUNC;
    mode = n.args[1];
    break;
#endif
  case SYS_openat:
    dirfd = static_cast<int>(n.args[0]);
    path_addr = n.args[1];
    flags = n.args[2];
    mode = n.args[3];
    break;
  default: { // openat2
    dirfd = static_cast<int>(n.args[0]);
    path_addr = n.args[1];
    open_how how{};
    if (n.args[3] < sizeof how)
      return fail(EINVAL);
    if (auto ok = c.caller.read(n.args[2], &how, sizeof how); !ok)
      return fail(EFAULT);
    if (how.resolve != 0)
      // The caller's own resolution rules would have to be combined
      // with RESOLVE_IN_ROOT; not supported: callers fall back to openat.
      return fail(ENOSYS);
    flags = how.flags;
    mode = how.mode;
    break;
  }
  }
  flags &= 0xFFFFFFFFu;
  auto path = c.caller.read_string(path_addr, max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (path->empty())
    return fail(ENOENT);
  // What was read may be acted upon only while the caller still waits.
  if (!c.still_waiting())
    return c.gone();
  if ((flags & O_TMPFILE) == O_TMPFILE)
    return fail(EOPNOTSUPP);
  std::string abs;
  if (int err = absolute(c.caller, dirfd, *path, abs); err != 0)
    return fail(err);
  // Another process's /proc entry is never opened for a worker, whatever
  // the policy says (its own process's is).
  if (int err = other_process_entry(c.caller, abs); err != 0)
    return fail(err);
  // Its own entry: the kernel lets a process into it whether or not it is
  // dumpable (a non-dumpable process's entry is root's: its fd directory,
  // its maps). The supervisor reaches it for the caller with CAP_SYS_PTRACE
  // and, to read, CAP_DAC_READ_SEARCH, for the resolution and the reopen
  // only; a write there gets no capability.
  const bool read_only = (flags & O_ACCMODE) == O_RDONLY && (flags & (O_TRUNC | O_CREAT)) == 0;
  const uint64_t own_entry_caps =
      own_process_entry(c.caller, abs)
          ? mediation::ptrace_cap() | (read_only ? mediation::read_search_cap() : 0)
          : 0;

  const int acc = static_cast<int>(flags & O_ACCMODE);
  const bool cloexec = (flags & O_CLOEXEC) != 0;
  const bool o_path = (flags & O_PATH) != 0;
  auto answer_fd = [&](int fd) -> bool {
    if (!one_step_fds_)
      return static_cast<bool>(listener.respond_with_fd(n.id, fd, cloexec));
    auto sent = listener.send_fd(n.id, fd, cloexec);
    if (!sent && sent.error().code == EINPROGRESS) {
      // The caller's open returned 0: it must not run on believing that is
      // the file. Its whole sandbox goes (the pool reports worker_lost).
      spdlog::error("pool: worker {}: {}; killing the worker", w.id, sent.error().describe());
      mediation::raised_capabilities step(mediation::kill_cap());
      (void)platform::pidfd_signal(w.pidfd, SIGKILL);
      w.killed = true;
    }
    return static_cast<bool>(sent);
  };
  auto report = [&](const std::string& target, const pol::decision& d) {
    if (d.verdict == pol::action::warn)
      warn(c, target, d);
  };

  for (int attempt = 0; attempt < 4; ++attempt) {
    unique_fd opath;
    {
      mediation::raised_capabilities step(own_entry_caps);
      opath.reset(open_in_root(w.root.get(), abs,
                               O_PATH | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY))));
    }
    if (!opath && errno == ENOENT && (flags & O_CREAT) != 0) {
      // Creation: decide on the resolved parent and the new name, then
      // create exclusively in that very directory.
      std::string parent = abs;
      while (parent.size() > 1 && parent.back() == '/')
        parent.pop_back();
      if (parent.size() != abs.size())
        return fail(EISDIR);
      const auto slash = parent.find_last_of('/');
      const std::string name = parent.substr(slash + 1);
      parent = slash == 0 ? "/" : parent.substr(0, slash);
      if (name.empty() || name == "." || name == "..")
        return fail(EISDIR);
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
      if (acc != O_RDONLY)
        perms |= pol::to_access(pol::fs_perm::write_file);
      const auto d = rules_only(policy_->check_fs(target, perms));
      if (d.verdict == pol::action::deny)
        return deny(c, target, d);
      // The worker's Landlock rights (emulated): MAKE_REG in the directory,
      // and the open of the new file itself.
      if ((platform::landlock_fs::make_reg & ~landlock_rights(canon_parent)) != 0 ||
          (open_rights(flags & ~static_cast<uint64_t>(O_TRUNC), false) & ~landlock_rights(target)) !=
              0)
        return fail(EACCES);
      const uint64_t create_flags =
          (flags & ~static_cast<uint64_t>(O_CLOEXEC)) | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
      if (!private_fs())
        return fail(ENOMEM);
      use_umask_of(w, c.caller);
      unique_fd created(::openat(dir.get(), name.c_str(), static_cast<int>(create_flags),
                                 static_cast<mode_t>(mode & 07777)));
      if (!created) {
        if (errno == EEXIST && (flags & O_EXCL) == 0)
          continue; // created by someone else meanwhile: open the existing file
        return fail(errno);
      }
      if (!answer_fd(created.get()))
        return c.gone();
      report(target, d);
      return;
    }
    if (!opath)
      return fail(errno);
    if ((flags & O_CREAT) != 0 && (flags & O_EXCL) != 0)
      return fail(EEXIST);
    struct stat st;
    if (::fstat(opath.get(), &st) != 0)
      return fail(errno);
    if (S_ISLNK(st.st_mode) && !o_path)
      return fail(ELOOP); // O_NOFOLLOW on a symlink
    std::string canon;
    if (int err = fd_path(opath.get(), canon); err != 0)
      return fail(err);
    // Checked again on what was resolved: a symlink may lead there.
    if (int err = other_process_object(c.caller, opath.get(), canon); err != 0)
      return fail(err);
    const bool dir = S_ISDIR(st.st_mode);
    pol::fs_access perms = 0;
    if (o_path || acc == O_RDONLY)
      perms = pol::to_access(dir ? pol::fs_perm::read_dir : pol::fs_perm::read_file);
    else if (acc == O_WRONLY)
      perms = pol::to_access(pol::fs_perm::write_file);
    else
      perms = pol::to_access(pol::fs_perm::read_file) | pol::to_access(pol::fs_perm::write_file);
    if ((flags & O_TRUNC) != 0 && !o_path)
      perms |= pol::to_access(pol::fs_perm::truncate) | pol::to_access(pol::fs_perm::write_file);
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
    if (!o_path && (open_rights(flags, dir) & ~landlock_rights(canon)) != 0)
      return fail(EACCES);
    if (d.verdict == pol::action::deny) {
      // A read the kernel refuses by itself (a path covered in the root,
      // DAC) reveals nothing: it ends with the kernel's errno, as without
      // the supervisor. Only a read that would succeed ends the worker; the
      // probe's fd is closed here, never injected.
      if (!o_path) {
        unique_fd probe(
            ::open(("/proc/self/fd/" + std::to_string(opath.get())).c_str(),
                   static_cast<int>(O_RDONLY | O_CLOEXEC | O_NONBLOCK | (flags & O_DIRECTORY))));
        if (!probe)
          return fail(errno);
      }
      {
        mediation::raised_capabilities step(mediation::kill_cap());
        (void)platform::pidfd_signal(w.pidfd, SIGKILL);
      }
      w.killed = true;
      (void)listener.respond_error(n.id, EACCES);
      r.what = mediation_result::outcome::kill;
      r.event = make_event("optimistic_violation", c.name, canon, d.verdict, d.pointer, n.pid);
      r.event.decision = "kill";
      return;
    }
    unique_fd real;
    if (o_path) {
      real = std::move(opath);
    } else {
      // Reopen the object already resolved: the caller's flags apply to
      // it, and the DAC and mount checks are made again as the worker.
      const bool fifo = S_ISFIFO(st.st_mode);
      uint64_t reopen =
          (flags & ~static_cast<uint64_t>(O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY)) |
          O_CLOEXEC;
      if (fifo)
        reopen |= O_NONBLOCK; // never wait for a peer on this thread
      {
        mediation::raised_capabilities step(own_entry_caps);
        real.reset(::open(("/proc/self/fd/" + std::to_string(opath.get())).c_str(),
                          static_cast<int>(reopen)));
      }
      if (!real)
        return fail(errno);
      if (fifo && (flags & O_NONBLOCK) == 0) {
        const int fl = ::fcntl(real.get(), F_GETFL);
        if (fl >= 0)
          (void)::fcntl(real.get(), F_SETFL, fl & ~O_NONBLOCK);
      }
    }
    if (!answer_fd(real.get()))
      return c.gone();
    report(canon, d);
    return;
  }
  fail(EAGAIN); // the name kept appearing and disappearing
}

void syscall_mediator::decide_exec(mediated_worker& w, call& c, mediation_result& r) {
  auto& n = c.n;
  auto& listener = *w.listener;
  auto fail = [&](int err) { c.fail(err); };
  const bool at = n.nr == SYS_execveat;
  const int dirfd = at ? static_cast<int>(n.args[0]) : AT_FDCWD;
  auto path = c.caller.read_string(at ? n.args[1] : n.args[0], max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (!c.still_waiting())
    return c.gone();
  std::string abs;
  if (path->empty()) {
    if (!at || (n.args[4] & AT_EMPTY_PATH) == 0)
      return fail(ENOENT);
    if (int err = c.caller.link_path("fd/" + std::to_string(dirfd), abs); err != 0)
      return fail(err);
  } else if (int err = absolute(c.caller, dirfd, *path, abs); err != 0) {
    return fail(err);
  }
  pol::decision d;
  std::string target;
  // The program, lexically and resolved in the root (the more restrictive
  // wins); then, for a script, the interpreter its #! line names, which the
  // kernel starts as a program too (up to four levels, as the kernel).
  // The dynamic loader keeps Landlock EXECUTE for the programs that name
  // it: run as a program itself it is refused here by the exec default too
  // (a deny default, not left to the static layers), unless a rule allows
  // it. The kernel's own loading of an ELF interpreter is no system call.
  auto is_loader = [](const std::string& p) {
    const auto& l = elf_loaders();
    return std::find(l.begin(), l.end(), p) != l.end();
  };
  auto consider = [&](const std::string& program) {
    const std::string lexical = normalise(program);
    auto weigh = [&](const std::string& p) {
      const auto full = policy_->check_exec(p);
      const auto dp = is_loader(p) ? full : rules_only(full);
      if (target.empty() || static_cast<int>(dp.verdict) > static_cast<int>(d.verdict)) {
        d = dp;
        target = p;
      }
    };
    weigh(lexical);
    unique_fd opath(open_in_root(w.root.get(), program, O_PATH | O_CLOEXEC));
    std::string canon;
    if (opath && fd_path(opath.get(), canon) == 0 && canon != lexical)
      weigh(canon);
  };
  consider(abs);
  std::string script = abs;
  for (int depth = 0; depth < 4 && d.verdict != pol::action::deny; ++depth) {
    const std::string interpreter = script_interpreter(w.root.get(), script);
    std::string next;
    if (interpreter.empty() || absolute(c.caller, AT_FDCWD, interpreter, next) != 0)
      break;
    consider(next);
    script = next;
  }
  if (d.verdict == pol::action::deny)
    return deny(c, target, d);
  if (!listener.respond_continue(n.id))
    return c.gone();
  r.what = mediation_result::outcome::allow;
  if (d.verdict == pol::action::warn)
    warn(c, target, d);
}

platform::notify_spec notify_spec_for(const pol::policy_document& doc) {
  platform::notify_spec spec;
  auto add = [&](std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (std::find(spec.syscalls.begin(), spec.syscalls.end(), name) == spec.syscalls.end())
        spec.syscalls.emplace_back(name);
  };
  auto perm = [](pol::fs_perm p) { return pol::to_access(p); };
  pol::fs_access decided = 0;
  if (doc.effective_fs_default() == pol::action::warn)
    decided = pol::fs_access_all;
  for (const auto& rule : doc.fs_rules)
    if (is_decided(rule))
      decided |= rule.perms;
  auto any = [&](pol::fs_access mask) { return (decided & mask) != 0; };

  const pol::fs_access opens = read_only_perms | perm(pol::fs_perm::write_file) |
                               perm(pol::fs_perm::truncate) | perm(pol::fs_perm::make_reg);
  if (any(opens)) {
    add({"open", "openat", "creat", "openat2"});
    spec.open_writes_only = !any(read_only_perms);
  }
  // The supervisor creates with the caller's umask, which it reads once per
  // sandbox and then only again after a umask(2) (continued, only noted).
  const pol::fs_access makes = perm(pol::fs_perm::make_reg) | perm(pol::fs_perm::make_dir) |
                               perm(pol::fs_perm::make_fifo) | perm(pol::fs_perm::make_sock) |
                               perm(pol::fs_perm::make_char) | perm(pol::fs_perm::make_block);
  if (any(opens) || any(makes))
    add({"umask"});
  // Calls that change the tree. A rename or a hard link gives an inode a
  // new name, which must not escape any decided rule: they follow every
  // decided permission. The others follow the permission they exercise.
  if (decided != 0)
    add({"rename", "renameat", "renameat2", "link", "linkat"});
  if (any(perm(pol::fs_perm::remove_file)))
    add({"unlink", "unlinkat"});
  if (any(perm(pol::fs_perm::remove_dir)))
    add({"rmdir", "unlinkat"});
  if (any(perm(pol::fs_perm::make_dir)))
    add({"mkdir", "mkdirat"});
  if (any(perm(pol::fs_perm::make_sym)))
    add({"symlink", "symlinkat"});
  if (any(perm(pol::fs_perm::make_reg) | perm(pol::fs_perm::make_fifo) |
          perm(pol::fs_perm::make_sock) | perm(pol::fs_perm::make_char) |
          perm(pol::fs_perm::make_block)))
    add({"mknod", "mknodat"});
  if (any(perm(pol::fs_perm::truncate) | perm(pol::fs_perm::write_file)))
    add({"truncate"});
  // A pathname socket is a file: binding one creates it (make_sock),
  // connecting or sending to one writes to it (write_file, as the kernel's
  // own permission check has it).
  if (any(perm(pol::fs_perm::make_sock)))
    add({"bind"});
  if (any(perm(pol::fs_perm::write_file)))
    add({"connect", "sendto", "sendmsg", "sendmmsg"});

  // Net calls: see mediates_net (network_layers.hpp).
  if (mediates_net(doc))
    add({"connect", "bind", "sendto", "sendmsg", "sendmmsg"});

  bool exec = doc.effective_exec_default() == pol::action::warn;
  for (const auto& rule : doc.exec_rules)
    exec = exec || rule.verdict != pol::action::allow;
  if (exec)
    add({"execve", "execveat"});
  return spec;
}

} // namespace castellan
