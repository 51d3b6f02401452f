#pragma once

/// @file harness_launch.hpp
/// Forks and execs the Python harness. Everything the child needs is built
/// before fork(): between fork and exec the child allocates nothing, takes no
/// lock, and reports an exec failure through a CLOEXEC pipe.

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/root_builder.hpp"
#include "worker/options.hpp"
#include "worker/sandbox_setup.hpp"

namespace castellan::worker {

class harness_command;

/// How a launched worker's interpreter process runs the harness in the
/// interpreter it inherited from the launcher instead of exec'ing Python
/// (worker/warm_interpreter.hpp).
struct in_process_harness {
  /// Right after the fork, while PID 1 still builds the root and before any
  /// sandbox layer is applied: only what needs no sandbox because nothing
  /// untrusted exists yet (the interpreter's own after-fork work).
  void (*prepare)(const harness_command& cmd);
  /// Once the sandbox is applied: the harness; its result is the exit code.
  int (*run)(const harness_command& cmd);
};

/// The harness's argv and the fds it inherits, ready for execve.
class harness_command {
public:
  explicit harness_command(const options& opts);

  harness_command(const harness_command&) = delete;
  harness_command& operator=(const harness_command&) = delete;

  const char* path() const noexcept { return args_.front().c_str(); }
  char* const* argv() const noexcept { return argv_.data(); }
  std::size_t arg_count() const noexcept { return args_.size(); }
  /// The wire fds (and the control socket), in argv order; the only fds
  /// above 2 the harness keeps.
  const int* kept_fds() const noexcept { return kept_fds_; }
  int kept_fd_count() const noexcept { return kept_fd_count_; }
  /// The control socket (-1: none).
  int control_fd() const noexcept { return control_fd_; }
  /// For logs and error messages: the argv joined by spaces.
  std::string describe() const;

  /// The sandbox the child applies to itself before exec (nullptr: none).
  void set_sandbox(sandbox_setup* sandbox) noexcept { sandbox_ = sandbox; }
  sandbox_setup* sandbox() const noexcept { return sandbox_; }

  /// Run the harness through `h` instead of execve (null: exec).
  void set_in_process(const in_process_harness* h) noexcept { in_process_ = h; }
  const in_process_harness* in_process() const noexcept { return in_process_; }
  /// The harness's own arguments (after the interpreter, its flags and the
  /// script), and the script's path.
  std::vector<std::string> harness_args() const;
  const std::string& harness_path() const noexcept { return args_[harness_index]; }

private:
  static constexpr std::size_t harness_index = 4; ///< python -I -S -B <harness> …

  std::vector<std::string> args_;
  std::vector<char*> argv_;
  int kept_fds_[4];
  int kept_fd_count_ = 3;
  int control_fd_ = -1;
  sandbox_setup* sandbox_ = nullptr;
  const in_process_harness* in_process_ = nullptr;
};

/// Forks and execs `cmd`. The child starts with `child_mask` as its signal
/// mask, gets SIGKILL if this process dies (PR_SET_PDEATHSIG), and inherits
/// only fds 0-2 and the wire fds. Returns the child's pid once the exec has
/// succeeded; if it failed, the child is reaped and the failure carries the
/// exec errno. When the command has a sandbox and the child could not apply
/// it, `sandbox_exit` (if given) receives the child's exit code
/// (sandbox_setup.hpp) and the failure says which layer.
outcome<pid_t> spawn_harness(const harness_command& cmd, const sigset_t& child_mask,
                             int* sandbox_exit = nullptr);

/// A launched worker's order (worker_main.cpp): its interpreter process is
/// forked first, so that its interpreter's after-fork work and its reading
/// of the sandbox spec run while PID 1 reads the spec and builds the root;
/// it then waits for release() before it applies its own sandbox layers and
/// runs the harness. Destroyed unreleased (PID 1 failed), the child ends
/// without running anything and is reaped.
class early_harness {
public:
  /// Forks the child of `cmd` (which has an in_process harness); the child
  /// reads its own copy of the sandbox spec from `spec_fd` (pread: the
  /// offset shared with PID 1 does not matter).
  static outcome<early_harness> fork(const harness_command& cmd, const sigset_t& child_mask,
                                     int spec_fd);

  early_harness(early_harness&& other) noexcept;
  early_harness& operator=(early_harness&&) = delete;
  ~early_harness();

  /// PID 1 has built the root: sends the child `root`, and waits as
  /// spawn_harness does (same result, same `sandbox_exit`).
  outcome<pid_t> release(const platform::root_report& root, int* sandbox_exit);

private:
  early_harness(const harness_command& cmd, pid_t pid, unique_fd release, unique_fd report)
      : cmd_(&cmd), pid_(pid), release_(std::move(release)), report_(std::move(report)) {}
  const harness_command* cmd_;
  pid_t pid_;
  unique_fd release_; ///< write end: the root report, then EOF
  unique_fd report_;  ///< read end: EOF once the harness runs, or a failure
};

} // namespace castellan::worker
