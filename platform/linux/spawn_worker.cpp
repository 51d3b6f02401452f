/// @file spawn_worker.cpp
/// The Linux backend of spawn_worker: clone3 with CLONE_PIDFD, a clean fd
/// table and environment, and an exec error reported through a pipe.
///
/// The child runs in a copy of a multi-threaded process: between clone3 and
/// execve it may only make async-signal-safe calls, so everything it needs
/// (argv, envp, the fd plan) is prepared before the clone and the child
/// allocates nothing.

#include "platform/spawn_worker.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <set>

namespace castellan::platform {

namespace {

/// The child side: never returns. Failures are reported as an errno through
/// `err_fd` followed by _exit(127).
[[noreturn]] void run_child(const worker_spec& spec, char* const* argv, char* const* envp,
                            const std::vector<int>& staged, int err_fd, pid_t parent) {
  auto fail = [err_fd](int err) {
    ssize_t ignored = ::write(err_fd, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  };
  if (spec.die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      fail(errno);
    // The parent may have died between clone3 and prctl.
    if (::getppid() != parent)
      ::_exit(127);
  }
  // CAF threads block some signals and the supervisor may ignore SIGPIPE: the
  // worker starts from the defaults.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &dfl, nullptr); // EINVAL for SIGKILL/SIGSTOP is fine

  // `staged` holds each parent fd duplicated above every target, so that the
  // dup2 calls below cannot clobber a source that is still needed.
  int max_target = -1;
  for (std::size_t i = 0; i < spec.fds.size(); ++i) {
    if (::dup2(staged[i], spec.fds[i].child_fd) < 0)
      fail(errno);
    max_target = std::max(max_target, spec.fds[i].child_fd);
  }
  for (int fd = 0; fd <= max_target; ++fd) {
    bool keep = false;
    for (const auto& m : spec.fds)
      keep = keep || m.child_fd == fd;
    if (!keep)
      ::close(fd);
  }
  // Everything above the targets (the staged copies, whatever the supervisor
  // had open) is closed on exec; the error pipe stays open until then.
  if (::close_range(static_cast<unsigned>(max_target + 1), ~0u, CLOSE_RANGE_CLOEXEC) != 0)
    fail(errno);
  ::execve(spec.executable.c_str(), argv, envp);
  fail(errno);
}

outcome<void> validate(const worker_spec& spec) {
  // Fail closed: this backend starts plain processes; a spec that asks for
  // isolation must go to a backend that applies it, never run without it.
  if (spec.isolation != isolation_mode::none || spec.namespaces.any() || !spec.mounts.empty() ||
      spec.limits.memory_bytes != 0 || spec.limits.pids != 0 || spec.limits.cpu_percent != 0)
    return logic_failure("spawn_worker: the spec asks for isolation (namespaces, mounts or "
                         "limits) that the plain-process backend cannot apply; refusing to "
                         "start an unisolated worker");
  if (spec.executable.empty() || spec.executable.front() != '/')
    return logic_failure("spawn_worker: executable must be an absolute path, got '" +
                         spec.executable + "'");
  if (spec.argv.empty())
    return logic_failure("spawn_worker: argv is empty");
  std::set<int> targets;
  for (const auto& m : spec.fds) {
    if (m.child_fd < 0 || !targets.insert(m.child_fd).second)
      return logic_failure("spawn_worker: fd target " + std::to_string(m.child_fd) +
                           " is negative or mapped twice");
    if (::fcntl(m.parent_fd, F_GETFD) < 0)
      return errno_failure("spawn_worker: fd " + std::to_string(m.parent_fd) +
                           " to map to " + std::to_string(m.child_fd));
  }
  return {};
}

} // namespace

outcome<spawned_worker> spawn_worker(const worker_spec& spec) {
  if (auto ok = validate(spec); !ok)
    return ok.error();

  std::vector<char*> argv;
  for (const auto& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // Stage every source fd and the error pipe above all targets.
  int floor = 3;
  for (const auto& m : spec.fds)
    floor = std::max({floor, m.child_fd + 1, m.parent_fd + 1});
  std::vector<unique_fd> staged_owned;
  std::vector<int> staged;
  for (const auto& m : spec.fds) {
    int fd = ::fcntl(m.parent_fd, F_DUPFD_CLOEXEC, floor);
    if (fd < 0)
      return errno_failure("spawn_worker: staging fd " + std::to_string(m.parent_fd));
    staged_owned.emplace_back(fd);
    staged.push_back(fd);
  }
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC) != 0)
    return errno_failure("spawn_worker: pipe2");
  unique_fd err_read(pipe_fds[0]);
  unique_fd err_write_low(pipe_fds[1]);
  unique_fd err_write(::fcntl(err_write_low.get(), F_DUPFD_CLOEXEC, floor));
  if (!err_write)
    return errno_failure("spawn_worker: staging the error pipe");
  err_write_low.reset();

  int pidfd = -1;
  clone_args args;
  std::memset(&args, 0, sizeof args);
  args.flags = CLONE_PIDFD;
  args.pidfd = reinterpret_cast<uint64_t>(&pidfd);
  args.exit_signal = SIGCHLD;
  const pid_t parent = ::getpid();
  long rc = ::syscall(SYS_clone3, &args, sizeof args);
  if (rc < 0)
    return errno_failure("spawn_worker: clone3");
  if (rc == 0)
    run_child(spec, argv.data(), envp.data(), staged, err_write.get(), parent);

  spawned_worker child;
  child.pid = static_cast<pid_t>(rc);
  child.pidfd.reset(pidfd);
  err_write.reset();
  int child_errno = 0;
  ssize_t n;
  do {
    n = ::read(err_read.get(), &child_errno, sizeof child_errno);
  } while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof child_errno)) {
    siginfo_t info;
    ::waitid(P_PID, static_cast<id_t>(child.pid), &info, WEXITED);
    return errno_failure("spawn_worker: exec " + spec.executable, child_errno);
  }
  return child;
}

} // namespace castellan::platform
