/// @file spawn_worker.cpp
/// The Linux backend of spawn_worker: clone3 with CLONE_PIDFD, a clean fd
/// table and environment, and a start-up error reported through a pipe.
///
/// Two modes:
/// - isolation_mode::none: a plain child process.
/// - isolation_mode::namespaces: the child is born in new namespaces by
///   clone_sandboxed (namespaces.hpp): the parent writes its id maps and puts
///   it in its cgroups before releasing it; it becomes the unprivileged
///   sandbox user, keeps only the setup capabilities (ambient, inside its own
///   user namespace), and execs the worker, which is PID 1 of its pid
///   namespace.
///
/// The child runs in a copy of a multi-threaded process: between clone3 and
/// execve it may only make async-signal-safe calls, so everything it needs
/// (argv, envp, the fd plan, the id maps) is prepared before the clone and
/// the child allocates nothing.

#include "platform/spawn_worker.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <linux/sched.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <set>

#include "platform/linux/namespaces.hpp"

namespace castellan::platform {

namespace {

/// Everything the child needs to exec, prepared before the clone.
struct exec_plan {
  const worker_spec* spec;
  char* const* argv;
  char* const* envp;
  const int* staged; ///< spec->fds[i].parent_fd, duplicated above every target
  const in_process_start* in_process; ///< null: execve the spec's executable
  /// The spec's executable, opened (O_PATH) by the caller and staged above
  /// every target: the child runs it with execveat(AT_EMPTY_PATH), so it
  /// needs no search permission on the directories above it (a build or
  /// install below a 0700 home directory, which the worker's user cannot
  /// enter, still starts).
  int exec_fd;
};

/// execveat(plan.exec_fd, "", …, AT_EMPTY_PATH): returns only on failure.
void exec_planned(const exec_plan& plan) noexcept {
  ::syscall(SYS_execveat, plan.exec_fd, "", plan.argv, plan.envp, AT_EMPTY_PATH);
}

/// Default dispositions for every signal, then an empty mask (in that order:
/// no handler of the supervisor may run in the child).
void reset_signals() noexcept {
  struct sigaction dfl;
  std::memset(&dfl, 0, sizeof dfl);
  dfl.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    ::sigaction(sig, &dfl, nullptr); // EINVAL for SIGKILL/SIGSTOP is fine
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
}

/// Applies the fd plan: returns the failing step's errno (0 on success) and
/// the step in `step`. The descriptors above the targets (the staged copies,
/// whatever the supervisor had open, the status pipe) become close-on-exec;
/// `max_target` receives the highest target.
int apply_fd_plan(const exec_plan& plan, child_step& step, int& max_target) noexcept {
  const auto& fds = plan.spec->fds;
  max_target = -1;
  step = child_step::fd_plan;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    if (::dup2(plan.staged[i], fds[i].child_fd) < 0)
      return errno;
    max_target = std::max(max_target, fds[i].child_fd);
  }
  for (int fd = 0; fd <= max_target; ++fd) {
    bool keep = false;
    for (const auto& m : fds)
      keep = keep || m.child_fd == fd;
    if (!keep)
      ::close(fd);
  }
  step = child_step::close_range;
  if (::close_range(static_cast<unsigned>(max_target + 1), ~0u, CLOSE_RANGE_CLOEXEC) != 0)
    return errno;
  return 0;
}

/// The plain child: never returns. Failures are reported as an errno through
/// `err_fd` followed by _exit(127).
[[noreturn]] void run_plain_child(const exec_plan& plan, int err_fd, pid_t parent) {
  auto fail = [err_fd](int err) {
    ssize_t ignored = ::write(err_fd, &err, sizeof err);
    (void)ignored;
    ::_exit(127);
  };
  if (plan.spec->die_with_parent) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      fail(errno);
    // The parent may have died between clone3 and prctl.
    if (::getppid() != parent)
      ::_exit(127);
  }
  // CAF threads block some signals and the supervisor may ignore SIGPIPE: the
  // worker starts from the defaults.
  reset_signals();
  child_step step;
  int max_target;
  if (int err = apply_fd_plan(plan, step, max_target))
    fail(err);
  exec_planned(plan);
  fail(errno);
  ::_exit(127);
}

/// The sandboxed child, after clone_sandboxed's start-up steps.
int run_sandboxed_child(sandbox_child& self, void* arg) noexcept {
  const auto& plan = *static_cast<const exec_plan*>(arg);
  reset_signals();
  // Leave the supervisor's working directory behind (the worker pivots
  // anyway; a program that does not should not hold a host directory).
  if (::chdir("/") != 0)
    self.fail(child_step::fd_plan, errno);
  child_step step;
  int max_target;
  if (int err = apply_fd_plan(plan, step, max_target))
    self.fail(step, err);
  if (plan.in_process != nullptr) {
    // What exec would have done: the start-up is over (the status pipe
    // closes), no fd of the caller survives, and the environment is the
    // spec's. The caller is single-threaded (a launcher), so the child may
    // allocate from here on.
    self.started();
    if (::close_range(static_cast<unsigned>(max_target + 1), ~0u, 0) != 0)
      ::_exit(127);
    // The plan's arrays are this child's copy of the caller's memory: its
    // own to hand out as mutable, as execve would have.
    environ = const_cast<char**>(plan.envp);
    int argc = 0;
    while (plan.argv[argc] != nullptr)
      ++argc;
    ::_exit(plan.in_process->main(argc, const_cast<char**>(plan.argv)));
  }
  exec_planned(plan);
  self.fail(child_step::execve, errno);
}

bool limits_requested(const resource_limits& l) {
  return l.memory_bytes != 0 || l.pids != 0 || l.cpu_percent != 0;
}

outcome<void> validate_common(const worker_spec& spec) {
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

outcome<void> validate(const worker_spec& spec) {
  if (spec.isolation == isolation_mode::none) {
    // Fail closed: this mode starts plain processes; a spec that asks for
    // isolation must get it, never run without it.
    if (spec.namespaces.any() || !spec.mounts.empty() || limits_requested(spec.limits) ||
        !spec.cgroup.empty())
      return logic_failure("spawn_worker: the spec asks for isolation (namespaces, mounts, "
                           "cgroups or limits) but isolation_mode::none cannot apply it; "
                           "refusing to start an unisolated worker");
    return validate_common(spec);
  }
  const namespace_set& ns = spec.namespaces;
  if (!ns.user)
    return logic_failure("spawn_worker: isolation_mode::namespaces needs a user namespace "
                         "(namespaces.user); refusing to start a worker with host "
                         "credentials");
  if (!spec.mounts.empty() && !ns.mount)
    return logic_failure("spawn_worker: mounts need a mount namespace (namespaces.mount)");
  if (!spec.hostname.empty() && !ns.uts)
    return logic_failure("spawn_worker: a hostname needs a UTS namespace (namespaces.uts)");
  if (limits_requested(spec.limits) && spec.cgroup.empty())
    return logic_failure("spawn_worker: limits are set but no cgroup enforces them: create a "
                         "worker_cgroup (platform/linux/cgroups.hpp) with these limits and "
                         "put its directories in spec.cgroup; refusing to start an unlimited "
                         "worker");
  for (const auto& dir : spec.cgroup.directories) {
    struct stat st;
    if (dir.empty() || dir.front() != '/')
      return logic_failure("spawn_worker: cgroup directory '" + dir + "' is not absolute");
    if (::stat((dir + "/cgroup.procs").c_str(), &st) != 0)
      return errno_failure("spawn_worker: cgroup " + dir + "/cgroup.procs");
  }
  return validate_common(spec);
}

} // namespace

outcome<spawned_worker> spawn_worker(const worker_spec& spec,
                                     const in_process_start* in_process) {
  if (auto ok = validate(spec); !ok)
    return ok.error();
  if (in_process != nullptr &&
      (spec.isolation != isolation_mode::namespaces || in_process->main == nullptr))
    return logic_failure("spawn_worker: a start without exec needs a sandboxed spec and an "
                         "entry point");

  std::vector<char*> argv;
  for (const auto& a : spec.argv)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : spec.env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  // Stage every source fd (and the start-up pipes) above all targets.
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
  // The executable is opened here, with the caller's credentials, and
  // staged like the mapped fds. An fd opened O_PATH runs with execveat: the
  // kernel checks execute permission on the file itself, not on its path.
  int exec_fd = -1;
  if (in_process == nullptr) {
    unique_fd exe(::open(spec.executable.c_str(), O_PATH | O_CLOEXEC));
    if (!exe)
      return errno_failure("spawn_worker: open " + spec.executable);
    struct stat st;
    if (::fstat(exe.get(), &st) != 0)
      return errno_failure("spawn_worker: stat " + spec.executable);
    if (!S_ISREG(st.st_mode))
      return logic_failure("spawn_worker: " + spec.executable + " is not a regular file");
    exec_fd = ::fcntl(exe.get(), F_DUPFD_CLOEXEC, floor);
    if (exec_fd < 0)
      return errno_failure("spawn_worker: staging the executable's fd");
    staged_owned.emplace_back(exec_fd);
  }
  exec_plan plan{&spec, argv.data(), envp.data(), staged.data(), in_process, exec_fd};

  if (spec.isolation == isolation_mode::namespaces) {
    // The staged copies sit at [floor, floor + n): the start-up pipes go above.
    sandbox_clone_options options;
    options.namespaces = spec.namespaces;
    options.ids = spec.ids;
    options.cgroup = spec.cgroup;
    options.setup_capabilities = spec.setup_capabilities;
    options.die_with_parent = spec.die_with_parent;
    options.hostname = spec.hostname;
    options.memfd_noexec = spec.memfd_noexec;
    options.fd_floor = floor;
    options.sibling = in_process != nullptr && in_process->sibling;
    if (in_process != nullptr)
      options.on_cloned = in_process->on_cloned;
    auto child = clone_sandboxed(options, run_sandboxed_child, &plan);
    if (!child)
      return failure{child.error().code,
                     "spawn_worker: " + spec.executable + ": " + child.error().message};
    spawned_worker out;
    out.pid = child->pid;
    out.pidfd = std::move(child->pidfd);
    return out;
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
    run_plain_child(plan, err_write.get(), parent);

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
