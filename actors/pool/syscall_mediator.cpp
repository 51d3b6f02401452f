#include "actors/pool/syscall_mediator.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <signal.h>
#include <sys/fsuid.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <vector>

#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/linux/process_memory.hpp"

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;
namespace pol = policy;

constexpr std::size_t max_path = PATH_MAX - 1;
constexpr pol::fs_access read_only_perms =
  pol::to_access(pol::fs_perm::read_file) | pol::to_access(pol::fs_perm::read_dir);

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
    default:
      return "unknown";
  }
}

/// The sandbox-side path behind a /proc link ("/proc/self/fd/3",
/// "/proc/<tid>/cwd"). For an object of another mount namespace the kernel
/// prints the path up to that namespace's root: the path as the worker sees
/// it. 0 or an errno.
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

int open_in_root(int root, const std::string& path, uint64_t flags, uint64_t mode = 0) {
  open_how how{};
  how.flags = flags;
  how.mode = mode;
  how.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS;
  const long fd = ::syscall(SYS_openat2, root, path.c_str(), &how, sizeof how);
  return fd < 0 ? -1 : static_cast<int>(fd);
}

/// `path` made absolute (relative ones against the caller's cwd or dirfd,
/// as the sandbox sees them). 0 or an errno.
int absolute(pid_t tid, int dirfd, const std::string& path, std::string& out) {
  if (!path.empty() && path.front() == '/') {
    out = path;
    return 0;
  }
  std::string base;
  const std::string proc = "/proc/" + std::to_string(tid);
  if (int err = link_path(dirfd == AT_FDCWD ? proc + "/cwd" : proc + "/fd/" + std::to_string(dirfd),
                          base);
      err != 0)
    return err;
  out = base == "/" ? "/" + path : base + "/" + path;
  return 0;
}

/// Lexically normalised absolute path ("." and ".." and repeated slashes
/// folded; ".." stops at "/", as in the kernel).
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

/// The supervisor decides what the rules say; a domain default of `deny`
/// is what the static layers (the root's mounts, Landlock, DAC) were built
/// from, and they keep enforcing it: the supervisor then answers as the
/// kernel would (it opens as the worker, in the worker's root). A default
/// of `warn` is reported like a warn rule.
pol::decision rules_only(const pol::decision& d) {
  if (d.source == pol::decision_source::default_action && d.verdict == pol::action::deny)
    return pol::decision{pol::action::allow, pol::decision_source::default_action, -1,
                         d.pointer};
  return d;
}

bool is_harness_path(const std::string& path) {
  const std::string_view dir = sandbox_harness_dir;
  return path.compare(0, dir.size(), dir) == 0 &&
         (path.size() == dir.size() || path[dir.size()] == '/');
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

} // namespace

struct syscall_mediator::call {
  platform::notification n;
  const char* name = "unknown";
  clock_type::time_point received;
};

syscall_mediator::syscall_mediator(std::shared_ptr<const pol::compiled_policy> policy)
  : policy_(std::move(policy)) {}

void syscall_mediator::use_credentials_of(const mediated_worker& w) {
  // Per thread: DAC checks of the supervisor's own opens are made as the
  // worker's kernel uid/gid, and a switch away from fsuid 0 drops the
  // file-system capabilities (DAC override) from this thread's effective set.
  if (w.fsgid != current_fsgid_) {
    ::setfsgid(w.fsgid);
    current_fsgid_ = w.fsgid;
  }
  if (w.fsuid != current_fsuid_) {
    ::setfsuid(w.fsuid);
    current_fsuid_ = w.fsuid;
  }
}

std::optional<mediation_result> syscall_mediator::handle(mediated_worker& w) {
  auto n = w.listener->receive();
  if (!n)
    return std::nullopt; // ENOENT: the caller is gone; EAGAIN/EINTR: nothing now
  call c;
  c.n = *n;
  c.name = syscall_name(n->nr);
  c.received = clock_type::now();
  mediation_result r;
  if (w.killed) {
    // The worker is being killed: nothing more may succeed.
    (void)w.listener->respond_error(n->id, EPERM);
    return std::nullopt;
  }
  if (!w.root) {
    // Every process of the sandbox shares this root (chroot, unshare and
    // setns are refused by the anti-escape filter).
    const std::string proc = "/proc/" + std::to_string(n->pid);
    struct stat st;
    unique_fd root(::open((proc + "/root").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!root || ::stat(proc.c_str(), &st) != 0) {
      (void)w.listener->respond_error(n->id, EACCES);
      return std::nullopt;
    }
    w.root = std::move(root);
    w.fsuid = st.st_uid;
    w.fsgid = st.st_gid;
  }
  use_credentials_of(w);
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

namespace {

policy_event make_event(const char* kind, const char* syscall, std::string target,
                        pol::action verdict, std::string_view rule, pid_t pid) {
  policy_event e;
  e.kind = kind;
  e.syscall = syscall;
  e.target = std::move(target);
  e.decision = verdict == pol::action::deny ? "deny" : verdict == pol::action::warn ? "warn"
                                                                                     : "allow";
  e.rule = std::string(rule);
  e.pid = pid;
  e.timestamp_ns = now_ns();
  return e;
}

} // namespace

void syscall_mediator::decide_open(mediated_worker& w, call& c, mediation_result& r) {
  auto& n = c.n;
  auto& listener = *w.listener;
  auto fail = [&](int err) {
    (void)listener.respond_error(n.id, err);
    r.what = mediation_result::outcome::allow; // the kernel's own answer: nothing to report
  };
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
      platform::process_memory mem(n.pid);
      if (auto ok = mem.read(n.args[2], &how, sizeof how); !ok)
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
  platform::process_memory mem(n.pid);
  auto path = mem.read_string(path_addr, max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (path->empty())
    return fail(ENOENT);
  // What was read may be acted upon only while the caller still waits.
  if (!listener.id_valid(n.id))
    return void(r.what = mediation_result::outcome::gone);
  if ((flags & O_TMPFILE) == O_TMPFILE)
    return fail(EOPNOTSUPP);
  std::string abs;
  if (int err = absolute(n.pid, dirfd, *path, abs); err != 0)
    return fail(err);

  const int acc = static_cast<int>(flags & O_ACCMODE);
  const bool cloexec = (flags & O_CLOEXEC) != 0;
  const bool o_path = (flags & O_PATH) != 0;
  auto answer_fd = [&](int fd) -> bool {
    auto sent = listener.respond_with_fd(n.id, fd, cloexec);
    return static_cast<bool>(sent);
  };
  auto deny = [&](const std::string& target, const pol::decision& d) {
    r.what = mediation_result::outcome::deny;
    r.errno_value = EACCES;
    r.event = make_event("syscall_denied", c.name, target, d.verdict, d.pointer, n.pid);
    send_denial_detail(w, r.event, EACCES);
    (void)listener.respond_error(n.id, EACCES);
  };
  auto report = [&](const std::string& target, const pol::decision& d) {
    if (d.verdict == pol::action::warn) {
      r.what = mediation_result::outcome::warn;
      r.event = make_event("policy_warning", c.name, target, d.verdict, d.pointer, n.pid);
    }
  };

  for (int attempt = 0; attempt < 4; ++attempt) {
    unique_fd opath(open_in_root(
      w.root.get(), abs, O_PATH | O_CLOEXEC | (flags & (O_NOFOLLOW | O_DIRECTORY))));
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
      const std::string target = canon_parent == "/" ? "/" + name : canon_parent + "/" + name;
      pol::fs_access perms = pol::to_access(pol::fs_perm::make_reg);
      if (acc != O_RDONLY)
        perms |= pol::to_access(pol::fs_perm::write_file);
      const auto d = rules_only(policy_->check_fs(target, perms));
      if (d.verdict == pol::action::deny)
        return deny(target, d);
      const uint64_t create_flags = (flags & ~static_cast<uint64_t>(O_CLOEXEC)) | O_CREAT |
                                    O_EXCL | O_NOFOLLOW | O_CLOEXEC;
      const mode_t create_mode = static_cast<mode_t>(mode & 07777) & ~umask_of(n.pid);
      unique_fd created(::openat(dir.get(), name.c_str(), static_cast<int>(create_flags),
                                 create_mode));
      if (!created) {
        if (errno == EEXIST && (flags & O_EXCL) == 0)
          continue; // created by someone else meanwhile: open the existing file
        return fail(errno);
      }
      if (!answer_fd(created.get()))
        return void(r.what = mediation_result::outcome::gone);
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
    if (d.verdict == pol::action::deny) {
      if (!optimistic)
        return deny(canon, d);
      // A read the kernel refuses by itself (a path covered in the root,
      // DAC) reveals nothing: it ends with the kernel's errno, as without
      // the supervisor. Only a read that would succeed ends the worker; the
      // probe's fd is closed here, never injected.
      if (!o_path) {
        unique_fd probe(::open(("/proc/self/fd/" + std::to_string(opath.get())).c_str(),
                               static_cast<int>(O_RDONLY | O_CLOEXEC | O_NONBLOCK |
                                                (flags & O_DIRECTORY))));
        if (!probe)
          return fail(errno);
      }
      (void)platform::pidfd_signal(w.pidfd, SIGKILL);
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
      uint64_t reopen = (flags & ~static_cast<uint64_t>(O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC |
                                                        O_NOCTTY)) |
                        O_CLOEXEC;
      if (fifo)
        reopen |= O_NONBLOCK; // never wait for a peer on this thread
      real.reset(::open(("/proc/self/fd/" + std::to_string(opath.get())).c_str(),
                        static_cast<int>(reopen)));
      if (!real)
        return fail(errno);
      if (fifo && (flags & O_NONBLOCK) == 0) {
        const int fl = ::fcntl(real.get(), F_GETFL);
        if (fl >= 0)
          (void)::fcntl(real.get(), F_SETFL, fl & ~O_NONBLOCK);
      }
    }
    if (!answer_fd(real.get()))
      return void(r.what = mediation_result::outcome::gone);
    report(canon, d);
    return;
  }
  fail(EAGAIN); // the name kept appearing and disappearing
}

void syscall_mediator::decide_exec(mediated_worker& w, call& c, mediation_result& r) {
  auto& n = c.n;
  auto& listener = *w.listener;
  auto fail = [&](int err) { (void)listener.respond_error(n.id, err); };
  const bool at = n.nr == SYS_execveat;
  const int dirfd = at ? static_cast<int>(n.args[0]) : AT_FDCWD;
  platform::process_memory mem(n.pid);
  auto path = mem.read_string(at ? n.args[1] : n.args[0], max_path);
  if (!path)
    return fail(path.error().code != 0 ? path.error().code : EFAULT);
  if (!listener.id_valid(n.id))
    return void(r.what = mediation_result::outcome::gone);
  std::string abs;
  if (path->empty()) {
    if (!at || (n.args[4] & AT_EMPTY_PATH) == 0)
      return fail(ENOENT);
    if (int err = link_path("/proc/" + std::to_string(n.pid) + "/fd/" + std::to_string(dirfd), abs);
        err != 0)
      return fail(err);
  } else if (int err = absolute(n.pid, dirfd, *path, abs); err != 0) {
    return fail(err);
  }
  const std::string lexical = normalise(abs);
  pol::decision d = rules_only(policy_->check_exec(lexical));
  std::string target = lexical;
  unique_fd opath(open_in_root(w.root.get(), abs, O_PATH | O_CLOEXEC));
  std::string canon;
  if (opath && fd_path(opath.get(), canon) == 0 && canon != lexical) {
    const auto dc = rules_only(policy_->check_exec(canon));
    if (static_cast<int>(dc.verdict) > static_cast<int>(d.verdict)) {
      d = dc;
      target = canon;
    }
  }
  if (d.verdict == pol::action::deny) {
    r.what = mediation_result::outcome::deny;
    r.errno_value = EACCES;
    r.event = make_event("syscall_denied", c.name, target, d.verdict, d.pointer, n.pid);
    send_denial_detail(w, r.event, EACCES);
    (void)listener.respond_error(n.id, EACCES);
    return;
  }
  if (!listener.respond_continue(n.id))
    return void(r.what = mediation_result::outcome::gone);
  if (d.verdict == pol::action::warn) {
    r.what = mediation_result::outcome::warn;
    r.event = make_event("policy_warning", c.name, target, d.verdict, d.pointer, n.pid);
  }
}

platform::notify_spec notify_spec_for(const pol::policy_document& doc) {
  platform::notify_spec spec;
  pol::fs_access decided = 0;
  if (doc.effective_fs_default() == pol::action::warn)
    decided = pol::fs_access_all;
  for (const auto& rule : doc.fs_rules) {
    if (rule.verdict == pol::action::warn)
      decided |= rule.perms;
    // A denial of the whole tree is the default's job (mounts, Landlock);
    // a denial inside it carves out of what is granted: only the
    // supervisor can decide that.
    else if (rule.verdict == pol::action::deny && rule.path != "/" && rule.path != "/**")
      decided |= rule.perms;
  }
  const pol::fs_access opens = read_only_perms | pol::to_access(pol::fs_perm::write_file) |
                               pol::to_access(pol::fs_perm::truncate) |
                               pol::to_access(pol::fs_perm::make_reg);
  if ((decided & opens) != 0) {
    spec.syscalls = {"open", "openat", "creat", "openat2"};
    spec.open_writes_only = (decided & read_only_perms) == 0;
  }
  bool exec = doc.effective_exec_default() == pol::action::warn;
  for (const auto& rule : doc.exec_rules)
    exec = exec || rule.verdict != pol::action::allow;
  if (exec) {
    spec.syscalls.push_back("execve");
    spec.syscalls.push_back("execveat");
  }
  return spec;
}

} // namespace castellan
