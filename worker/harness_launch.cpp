/// @file harness_launch.cpp
/// fork + execve of the harness.

#include "worker/harness_launch.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <string>
#include <utility>

#include "ipc/unique_fd.hpp"
#include "platform/linux/enforcement_report.hpp"

extern char** environ;

namespace castellan::worker {

harness_command::harness_command(const options& opts) {
  // -I: isolated mode: PYTHON* variables and the user site are ignored and
  //     the script's directory stays out of sys.path (user code sees a
  //     clean path; the harness adds its own directory only for its import).
  // -S: no site.main(): no .pth files or sitecustomize run at start-up (they
  //     are arbitrary code, and halve the start-up time); the harness adds
  //     the site-packages directories and the exit()/quit() builtins itself.
  // -B: no .pyc writes (the sandbox's system dirs are read-only anyway).
  args_ = {opts.python,
           "-I",
           "-S",
           "-B",
           opts.harness,
           "--segment-fd",
           std::to_string(opts.segment_fd),
           "--to-worker-fd",
           std::to_string(opts.to_worker_fd),
           "--to-supervisor-fd",
           std::to_string(opts.to_supervisor_fd),
           "--mode",
           to_string(opts.mode)};
  if (opts.control_fd >= 0) {
    args_.push_back("--control-fd");
    args_.push_back(std::to_string(opts.control_fd));
  }
  argv_.reserve(args_.size() + 1);
  for (auto& a : args_)
    argv_.push_back(a.data());
  argv_.push_back(nullptr);
  kept_fds_[0] = opts.segment_fd;
  kept_fds_[1] = opts.to_worker_fd;
  kept_fds_[2] = opts.to_supervisor_fd;
  if (opts.control_fd >= 0) {
    kept_fds_[3] = opts.control_fd;
    kept_fd_count_ = 4;
    control_fd_ = opts.control_fd;
  }
}

std::vector<std::string> harness_command::harness_args() const {
  return {args_.begin() + harness_index + 1, args_.end()};
}

std::string harness_command::describe() const {
  std::string out;
  for (const auto& a : args_) {
    if (!out.empty())
      out += ' ';
    out += a;
  }
  return out;
}

namespace {

outcome<pid_t> await_start(const harness_command& cmd, pid_t pid, int report_fd,
                           int* sandbox_exit);

/// Closes every fd above 2 but the harness's own (which are not
/// close-on-exec by now).
void close_on_exec_now(const harness_command& cmd) noexcept {
  const int* kept = cmd.kept_fds();
  const int* kept_end = kept + cmd.kept_fd_count();
  const int highest = std::max(2, *std::max_element(kept, kept_end));
  for (int fd = 3; fd < highest; ++fd)
    if (std::find(kept, kept_end, fd) == kept_end)
      ::close(fd);
  ::close_range(static_cast<unsigned>(highest) + 1, UINT_MAX, 0);
}

/// The child between fork and exec: async-signal-safe calls only.
[[noreturn]] void exec_child(const harness_command& cmd, const sigset_t& child_mask, pid_t parent,
                             int report_fd) noexcept {
  int err = 0;
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    err = errno;
  } else if (::getppid() != parent) {
    // The worker died between fork and prctl: nobody would reap or wire us.
    ::_exit(127);
  } else {
    // Every other fd the worker may have inherited stays out of the harness
    // (best effort: an old kernel without close_range keeps them).
    ::close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC);
    for (int i = 0; i < cmd.kept_fd_count() && err == 0; ++i)
      if (::fcntl(cmd.kept_fds()[i], F_SETFD, 0) != 0)
        err = errno;
    if (err == 0 && ::sigprocmask(SIG_SETMASK, &child_mask, nullptr) != 0)
      err = errno;
    if (err == 0 && cmd.sandbox() != nullptr) {
      // Not async-signal-safe, and need not be: PID 1 of a sandbox is
      // single-threaded. A negative value tells the parent "sandbox layer".
      if (const int code = cmd.sandbox()->apply_in_child(cmd.control_fd()); code != 0) {
        err = -code;
        [[maybe_unused]] const ssize_t w = ::write(report_fd, &err, sizeof err);
        ::_exit(code);
      }
    }
    if (err == 0) {
      ::execve(cmd.path(), cmd.argv(), environ);
      err = errno;
    }
  }
  // The pipe is CLOEXEC and the parent is blocked reading it: a failed
  // write leaves it with EOF, which it reports as an unknown failure.
  [[maybe_unused]] const ssize_t n = ::write(report_fd, &err, sizeof err);
  ::_exit(127);
}

} // namespace

outcome<pid_t> spawn_harness(const harness_command& cmd, const sigset_t& child_mask,
                             int* sandbox_exit) {
  int report[2];
  if (::pipe2(report, O_CLOEXEC) != 0)
    return errno_failure("pipe2");
  unique_fd report_read{report[0]};
  unique_fd report_write{report[1]};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    return errno_failure("fork");
  if (pid == 0)
    exec_child(cmd, child_mask, parent, report_write.get());
  report_write.reset();
  return await_start(cmd, pid, report_read.get(), sandbox_exit);
}

namespace {

/// Until the child's report pipe says how its start ended: EOF when the
/// harness runs, else a failure record (the child is reaped then).
outcome<pid_t> await_start(const harness_command& cmd, pid_t pid, int report_fd,
                           int* sandbox_exit) {
  int err = 0;
  ssize_t n;
  do {
    n = ::read(report_fd, &err, sizeof err);
  } while (n < 0 && errno == EINTR);
  if (n == 0)
    return pid; // EOF: the exec closed the pipe
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (n == static_cast<ssize_t>(sizeof err) && err < 0) {
    if (sandbox_exit != nullptr)
      *sandbox_exit = -err;
    const char* layer = sandbox_exit_layer(-err);
    return logic_failure(std::string("sandbox: ") + (layer ? layer : "setup failed"));
  }
  if (n == static_cast<ssize_t>(sizeof err))
    return errno_failure("exec " + cmd.describe(), err);
  return logic_failure("exec " + cmd.describe() + ": the child failed before exec");
}

/// Reads everything until EOF (the root report); false on a read error.
bool read_all(int fd, std::string& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return false;
    if (n == 0)
      return true;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

/// The early child (see early_harness): prepares its interpreter, waits for
/// the root, applies its layers, runs the harness. It allocates: PID 1 of a
/// launched worker is single-threaded.
[[noreturn]] void early_child(const harness_command& cmd, const sigset_t& child_mask,
                              pid_t parent, int spec_fd, int release_fd, int report_fd) noexcept {
  auto report = [report_fd](int err) {
    [[maybe_unused]] const ssize_t n = ::write(report_fd, &err, sizeof err);
  };
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
    report(errno);
    ::_exit(127);
  }
  if (::getppid() != parent)
    ::_exit(127);
  ::close_range(3, UINT_MAX, CLOSE_RANGE_CLOEXEC);
  for (int i = 0; i < cmd.kept_fd_count(); ++i) {
    if (::fcntl(cmd.kept_fds()[i], F_SETFD, 0) != 0) {
      report(errno);
      ::_exit(127);
    }
  }
  if (::sigprocmask(SIG_SETMASK, &child_mask, nullptr) != 0) {
    report(errno);
    ::_exit(127);
  }
  cmd.in_process()->prepare(cmd);
  sandbox_failure failed;
  auto sandbox = sandbox_setup::read(spec_fd, failed);
  std::string root_json;
  if (!read_all(release_fd, root_json) || root_json.empty())
    ::_exit(127); // PID 1 gave up: nothing runs
  int code = failed.exit_code;
  if (sandbox) {
    auto root = platform::parse_root_report(root_json);
    code = root ? sandbox->apply_in_early_child(cmd.control_fd(), std::move(*root))
                : exit_sandbox_root;
  } else {
    std::fprintf(stderr, "castellan-worker: sandbox spec: %s\n",
                 failed.why.describe().c_str());
  }
  if (code != 0) {
    report(-code);
    ::_exit(code);
  }
  // What the exec would do: every fd still marked close-on-exec is closed
  // (the report pipe among them: its EOF tells PID 1 the harness runs).
  close_on_exec_now(cmd);
  ::_exit(cmd.in_process()->run(cmd));
}

} // namespace

outcome<early_harness> early_harness::fork(const harness_command& cmd,
                                           const sigset_t& child_mask, int spec_fd) {
  if (cmd.in_process() == nullptr)
    return logic_failure("early harness: needs an in-process harness");
  int release[2], report[2];
  if (::pipe2(release, O_CLOEXEC) != 0)
    return errno_failure("pipe2");
  unique_fd release_read{release[0]}, release_write{release[1]};
  if (::pipe2(report, O_CLOEXEC) != 0)
    return errno_failure("pipe2");
  unique_fd report_read{report[0]}, report_write{report[1]};
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0)
    return errno_failure("fork");
  if (pid == 0) {
    release_write.reset();
    early_child(cmd, child_mask, parent, spec_fd, release_read.get(), report_write.get());
  }
  return early_harness(cmd, pid, std::move(release_write), std::move(report_read));
}

early_harness::early_harness(early_harness&& other) noexcept
    : cmd_(other.cmd_), pid_(std::exchange(other.pid_, -1)),
      release_(std::move(other.release_)), report_(std::move(other.report_)) {}

early_harness::~early_harness() {
  if (pid_ <= 0)
    return;
  release_.reset(); // EOF before the root: the child exits
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
}

outcome<pid_t> early_harness::release(const platform::root_report& root, int* sandbox_exit) {
  const std::string json = platform::root_report_json(root);
  std::size_t done = 0;
  while (done < json.size()) {
    const ssize_t n = ::write(release_.get(), json.data() + done, json.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_failure("early harness: sending the root report"); // reaped by the destructor
    done += static_cast<std::size_t>(n);
  }
  release_.reset();
  const pid_t pid = std::exchange(pid_, -1);
  return await_start(*cmd_, pid, report_.get(), sandbox_exit);
}

} // namespace castellan::worker
