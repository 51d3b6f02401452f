#include "platform/linux/namespaces.hpp"

#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <pthread.h>

#include "platform/linux/capabilities.hpp"
#include "platform/linux/uid_map.hpp"

namespace castellan::platform {

namespace {

/// One failure record on the status pipe.
struct status_record {
  int32_t step;
  int32_t err;
};

struct ns_entry {
  const char* name;      ///< report name
  const char* proc_name; ///< /proc/<pid>/ns/<proc_name>
  bool namespace_set::*member;
  uint64_t flag;
};

constexpr ns_entry ns_table[] = {
  {"user", "user", &namespace_set::user, CLONE_NEWUSER},
  {"pid", "pid", &namespace_set::pid, CLONE_NEWPID},
  {"mount", "mnt", &namespace_set::mount, CLONE_NEWNS},
  {"net", "net", &namespace_set::net, CLONE_NEWNET},
  {"ipc", "ipc", &namespace_set::ipc, CLONE_NEWIPC},
  {"uts", "uts", &namespace_set::uts, CLONE_NEWUTS},
  {"cgroup", "cgroup", &namespace_set::cgroup, CLONE_NEWCGROUP},
};

/// Everything the child reads, prepared before the clone.
struct child_plan {
  const sandbox_clone_options* options;
  id_map_plan ids;
  bool unshare_cgroup_later; ///< joined cgroups after the clone: new cgroup ns then
  int sync_read;
  int sync_write;
  int status_read;
  int status_write;
  sandbox_child_main main;
  void* arg;
};

/// vm.memfd_noexec = 2 for this process's pid namespace; errors are left
/// to whoever reads the value back (async-signal-safe).
void write_memfd_noexec() noexcept {
  const int fd = ::open("/proc/sys/vm/memfd_noexec", O_WRONLY | O_CLOEXEC);
  if (fd < 0)
    return;
  [[maybe_unused]] const ssize_t n = ::write(fd, "2", 1);
  ::close(fd);
}

[[noreturn]] void child_entry(const child_plan& plan) noexcept {
  ::close(plan.sync_write);
  ::close(plan.status_read);
  sandbox_child self(plan.status_write);
  // 1. Wait until the parent has written the id maps and placed us in our
  //    cgroups. EOF means it gave up on us.
  char go = 0;
  ssize_t n;
  do {
    n = ::read(plan.sync_read, &go, 1);
  } while (n < 0 && errno == EINTR);
  if (n != 1)
    self.fail(child_step::wait_for_release, n < 0 ? errno : EPIPE);
  // 2. Before the uid changes: the kernel lets only the host's root uid
  //    write a sysctl file, and applies this one to the writer's pid
  //    namespace (the new one, of which this process is the init).
  if (plan.options->memfd_noexec)
    write_memfd_noexec();
  // 3. Become the sandbox user.
  id_step failed_at = id_step::none;
  if (int err = become_sandbox_ids(plan.ids, failed_at)) {
    self.fail(failed_at == id_step::setgroups   ? child_step::setgroups
              : failed_at == id_step::setresgid ? child_step::setresgid
                                                : child_step::setresuid,
              err);
  }
  if (plan.options->setup_capabilities) {
    if (int err = keep_ambient_capabilities(setup_capability_mask()))
      self.fail(child_step::ambient_capabilities, err);
  }
  // 4. Die with the parent. Set after the id change (which clears it). In a
  //    new pid namespace getppid() is 0, so the parent's liveness is read
  //    from the sync pipe instead: it holds the write end until we exec.
  if (plan.options->die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL, 0, 0, 0) != 0)
      self.fail(child_step::parent_death_signal, errno);
    pollfd pfd{plan.sync_read, POLLIN, 0};
    if (::poll(&pfd, 1, 0) > 0 && (pfd.revents & (POLLHUP | POLLERR)) != 0)
      ::_exit(127);
  }
  ::close(plan.sync_read);
  // 5. Namespace-local settings.
  const std::string& host = plan.options->hostname;
  if (!host.empty() && ::sethostname(host.data(), host.size()) != 0)
    self.fail(child_step::sethostname, errno);
  if (plan.unshare_cgroup_later && ::unshare(CLONE_NEWCGROUP) != 0)
    self.fail(child_step::cgroup_namespace, errno);
  ::_exit(plan.main(self, plan.arg));
}

/// A pipe whose two ends sit at or above `floor`, close-on-exec.
outcome<std::pair<unique_fd, unique_fd>> high_pipe(int floor, const char* what) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return errno_failure(std::string("clone sandboxed: pipe2 (") + what + ")");
  unique_fd low_r(fds[0]), low_w(fds[1]);
  unique_fd r(::fcntl(low_r.get(), F_DUPFD_CLOEXEC, floor));
  unique_fd w(::fcntl(low_w.get(), F_DUPFD_CLOEXEC, floor));
  if (!r || !w)
    return errno_failure(std::string("clone sandboxed: placing the ") + what + " pipe above fd " +
                         std::to_string(floor));
  return std::make_pair(std::move(r), std::move(w));
}

std::string to_hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%llx", static_cast<unsigned long long>(v));
  return buf;
}

/// A sibling (CLONE_PARENT) is not the caller's child: waitid fails with
/// ECHILD at once and its parent reaps it.
void kill_and_reap(pid_t pid, int pidfd) noexcept {
  ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  siginfo_t info;
  while (::waitid(P_PIDFD, static_cast<id_t>(pidfd), &info, WEXITED) != 0 && errno == EINTR) {
  }
  (void)pid;
}

outcome<void> join_cgroups(pid_t pid, const cgroup_placement& placement) {
  const std::string text = std::to_string(pid);
  for (const auto& dir : placement.directories) {
    const std::string procs = dir + "/cgroup.procs";
    unique_fd fd(::open(procs.c_str(), O_WRONLY | O_CLOEXEC));
    if (!fd)
      return errno_failure("clone sandboxed: open " + procs);
    if (::write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size()))
      return errno_failure("clone sandboxed: write pid " + text + " to " + procs);
  }
  return {};
}

} // namespace

uint64_t clone_flags(const namespace_set& ns) noexcept {
  uint64_t flags = 0;
  for (const auto& e : ns_table)
    if (ns.*e.member)
      flags |= e.flag;
  return flags;
}

std::vector<std::string> namespace_names(const namespace_set& ns) {
  std::vector<std::string> out;
  for (const auto& e : ns_table)
    if (ns.*e.member)
      out.emplace_back(e.name);
  return out;
}

outcome<namespace_set> namespaces_of(pid_t pid) {
  namespace_set out;
  for (const auto& e : ns_table) {
    struct stat mine, theirs;
    const std::string self_path = std::string("/proc/self/ns/") + e.proc_name;
    const std::string other_path =
      "/proc/" + std::to_string(pid) + "/ns/" + e.proc_name;
    if (::stat(self_path.c_str(), &mine) != 0)
      return errno_failure("namespaces: stat " + self_path);
    if (::stat(other_path.c_str(), &theirs) != 0)
      return errno_failure("namespaces: stat " + other_path);
    out.*e.member = mine.st_ino != theirs.st_ino || mine.st_dev != theirs.st_dev;
  }
  return out;
}

const char* to_string(child_step step) noexcept {
  switch (step) {
    case child_step::wait_for_release:
      return "waiting for the parent to release the child";
    case child_step::setgroups:
      return "setgroups(0) (clearing supplementary groups)";
    case child_step::setresgid:
      return "setresgid to the sandbox gid";
    case child_step::setresuid:
      return "setresuid to the sandbox uid";
    case child_step::ambient_capabilities:
      return "raising the setup capabilities as ambient";
    case child_step::parent_death_signal:
      return "prctl(PR_SET_PDEATHSIG)";
    case child_step::parent_gone:
      return "the parent died during start-up";
    case child_step::sethostname:
      return "sethostname";
    case child_step::cgroup_namespace:
      return "unshare(CLONE_NEWCGROUP)";
    case child_step::signals:
      return "resetting signal dispositions";
    case child_step::fd_plan:
      return "mapping the inherited fds (dup2)";
    case child_step::close_range:
      return "close_range";
    case child_step::execve:
      return "execve";
    case child_step::child_main:
      return "the child's own set-up";
  }
  return "unknown step";
}

void unblock_all_signals() noexcept {
  sigset_t none;
  sigemptyset(&none);
  ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
}

void sandbox_child::fail(child_step step, int err) const noexcept {
  status_record rec{static_cast<int32_t>(step), err};
  ssize_t ignored = ::write(status_fd_, &rec, sizeof rec);
  (void)ignored;
  ::_exit(127);
}

void sandbox_child::started() noexcept {
  if (status_fd_ >= 0)
    ::close(status_fd_);
  status_fd_ = -1;
}

outcome<sandboxed_child> clone_sandboxed(const sandbox_clone_options& options,
                                         sandbox_child_main child_main, void* arg) {
  const namespace_set& ns = options.namespaces;
  if (!ns.user)
    return logic_failure("clone sandboxed: a user namespace is required (namespaces.user)");
  if (!options.hostname.empty() && !ns.uts)
    return logic_failure("clone sandboxed: a hostname needs a UTS namespace (namespaces.uts)");
  auto ids = plan_id_maps(options.ids);
  if (!ids)
    return ids.error().wrap("clone sandboxed");

  unique_fd cgroup_dir;
  if (!options.cgroup.clone_into.empty()) {
    cgroup_dir.reset(::open(options.cgroup.clone_into.c_str(),
                            O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup_dir)
      return errno_failure("clone sandboxed: open cgroup " + options.cgroup.clone_into);
  }
  const int floor = std::max(options.fd_floor, 3);
  auto sync = high_pipe(floor, "sync");
  if (!sync)
    return sync.error();
  auto status = high_pipe(floor, "status");
  if (!status)
    return status.error();

  uint64_t flags = clone_flags(ns) | CLONE_PIDFD;
  // Joining cgroups by a write happens after the clone: the cgroup namespace
  // is created then (from inside), so that its root is the worker's cgroup.
  const bool join_later = !options.cgroup.directories.empty();
  const bool unshare_cgroup_later = ns.cgroup && join_later;
  if (unshare_cgroup_later)
    flags &= ~uint64_t{CLONE_NEWCGROUP};
  if (cgroup_dir)
    flags |= CLONE_INTO_CGROUP;
  if (options.sibling)
    flags |= CLONE_PARENT;

  child_plan plan{&options,
                  *ids,
                  unshare_cgroup_later,
                  sync->first.get(),
                  sync->second.get(),
                  status->first.get(),
                  status->second.get(),
                  child_main,
                  arg};

  // No handler of the supervisor may run in the child: it starts with every
  // signal blocked, and child_main resets dispositions before unblocking.
  sigset_t all, saved;
  sigfillset(&all);
  ::pthread_sigmask(SIG_SETMASK, &all, &saved);
  int pidfd = -1;
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = flags;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  // A sibling's exit signal is the caller's own (clone3 refuses any other).
  args.exit_signal = options.sibling ? 0 : SIGCHLD;
  if (cgroup_dir)
    args.cgroup = static_cast<__u64>(cgroup_dir.get());
  const long rc = ::syscall(SYS_clone3, &args, sizeof args);
  const int clone_errno = errno;
  if (rc == 0)
    child_entry(plan);
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  if (rc < 0)
    return errno_failure(std::string("clone sandboxed: clone3 (") +
                         (cgroup_dir ? "CLONE_INTO_CGROUP " + options.cgroup.clone_into + ", "
                                     : std::string()) +
                         "flags 0x" + to_hex(flags) + ")",
                         clone_errno);

  sandboxed_child child;
  child.pid = static_cast<pid_t>(rc);
  child.pidfd.reset(pidfd);
  if (options.on_cloned)
    options.on_cloned(child.pid);
  sync->first.reset();
  status->second.reset();

  auto abandon = [&](failure f) -> outcome<sandboxed_child> {
    sync->second.reset(); // the child sees EOF if it is still waiting
    kill_and_reap(child.pid, child.pidfd.get());
    return f;
  };
  if (auto r = write_id_maps(child.pid, *ids); !r)
    return abandon(r.error().wrap("clone sandboxed"));
  if (auto r = join_cgroups(child.pid, options.cgroup); !r)
    return abandon(r.error());
  const char go = 1;
  if (::write(sync->second.get(), &go, 1) != 1)
    return abandon(errno_failure("clone sandboxed: releasing the child"));

  // Wait for EOF (exec or started()) or a failure record, with a deadline.
  const auto deadline = std::chrono::steady_clock::now() + options.start_timeout;
  status_record rec{};
  std::size_t got = 0;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    pollfd pfd{status->first.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready < 0)
      return abandon(errno_failure("clone sandboxed: poll on the status pipe"));
    if (ready == 0)
      return abandon(logic_failure("clone sandboxed: the child did not start within " +
                                   std::to_string(options.start_timeout.count()) + " ms"));
    const ssize_t n = ::read(status->first.get(), reinterpret_cast<char*>(&rec) + got,
                             sizeof rec - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return abandon(errno_failure("clone sandboxed: read the status pipe"));
    if (n == 0)
      break;
    got += static_cast<std::size_t>(n);
    if (got == sizeof rec)
      break;
  }
  if (got == sizeof rec) {
    const auto step = static_cast<child_step>(rec.step);
    return abandon(errno_failure(std::string("clone sandboxed: child: ") + to_string(step),
                                 rec.err));
  }
  if (got != 0)
    return abandon(logic_failure("clone sandboxed: truncated status record"));
  return child;
}

namespace {

/// Writes "0" to the sysctl file `path` and reads it back. A file that does
/// not exist (a kernel without the feature) is left alone when `optional`.
outcome<void> sysctl_off(const char* path, bool optional) {
  unique_fd fd(::open(path, O_RDWR | O_CLOEXEC));
  if (!fd) {
    if (optional && errno == ENOENT)
      return {};
    return errno_failure(std::string("open ") + path);
  }
  if (::write(fd.get(), "0\n", 2) != 2)
    return errno_failure(std::string("write 0 to ") + path +
                         " (needs CAP_NET_ADMIN over the namespace)");
  char buf[16] = {};
  if (::pread(fd.get(), buf, sizeof buf - 1, 0) < 1 || buf[0] != '0' ||
      (buf[1] != '\n' && buf[1] != 0))
    return logic_failure(std::string(path) + " is still '" + buf + "' after writing 0");
  return {};
}

} // namespace

outcome<void> close_landlock_tcp_bypasses() {
  // Never the host's settings: a process that can see init's namespace and
  // shares it is not in a sandbox of its own.
  struct stat mine {};
  struct stat init {};
  if (::stat("/proc/self/ns/net", &mine) != 0)
    return errno_failure("stat /proc/self/ns/net");
  if (::stat("/proc/1/ns/net", &init) == 0 && init.st_ino == mine.st_ino &&
      init.st_dev == mine.st_dev)
    return logic_failure("this is the network namespace of the host's init");
  if (auto r = sysctl_off("/proc/sys/net/ipv4/tcp_fastopen", false); !r)
    return r;
  return sysctl_off("/proc/sys/net/mptcp/enabled", true);
}

outcome<void> set_loopback_up() {
  unique_fd sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (!sock)
    return errno_failure("loopback: socket(AF_INET)");
  ifreq req;
  std::memset(&req, 0, sizeof req);
  std::strncpy(req.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(sock.get(), SIOCGIFFLAGS, &req) != 0)
    return errno_failure("loopback: SIOCGIFFLAGS lo");
  req.ifr_flags = static_cast<short>(req.ifr_flags | IFF_UP | IFF_RUNNING);
  if (::ioctl(sock.get(), SIOCSIFFLAGS, &req) != 0)
    return errno_failure("loopback: SIOCSIFFLAGS lo up (needs CAP_NET_ADMIN)");
  return {};
}

} // namespace castellan::platform
