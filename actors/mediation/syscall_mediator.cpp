/// @file syscall_mediator.cpp
/// What every family of decided calls shares: receiving a notification and
/// dispatching it to its family (handle), this thread's identity while it
/// acts for a worker (its fsuid/fsgid, groups, umask, effective ids), the
/// emulation of the worker's Landlock rights, and the answers (deny, warn,
/// performed, refused).

#include "actors/mediation/syscall_mediator.hpp"

#include <fcntl.h>
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

#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/mediation_privileges.hpp"
#include "actors/mediation/network_layers.hpp"
#include "actors/mediation/notify_mapping.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "actors/policy/engine/path.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;
namespace pol = policy;
using namespace mediation;

constexpr pol::fs_access refer_perm = pol::to_access(pol::fs_perm::refer);

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
    if (!decides_fs_rule(rule))
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
  c.r->event = make_event(event_kind::syscall_denied, c.name, target, pol::action::deny, d.pointer, c.n.pid);
  send_denial_detail(*c.w, c.r->event, err);
  (void)c.listener().respond_error(c.n.id, err);
}

void syscall_mediator::warn(call& c, const std::string& target, const pol::decision& d) {
  if (c.r->what == mediation_result::outcome::gone)
    return;
  c.r->what = mediation_result::outcome::warn;
  c.r->event = make_event(event_kind::policy_warning, c.name, target, pol::action::warn, d.pointer, c.n.pid);
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

} // namespace castellan
