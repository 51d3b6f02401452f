#pragma once

/// @file harness_launch.hpp
/// Forks and execs the Python harness. Everything the child needs is built
/// before fork(): between fork and exec the child allocates nothing, takes no
/// lock, and reports an exec failure through a CLOEXEC pipe.

#include <signal.h>
#include <sys/types.h>

#include <string>
#include <vector>

#include "ipc/result.hpp"
#include "worker/options.hpp"
#include "worker/sandbox_setup.hpp"

namespace castellan::worker {

/// The harness's argv and the fds it inherits, ready for execve.
class harness_command {
public:
  explicit harness_command(const options& opts);

  harness_command(const harness_command&) = delete;
  harness_command& operator=(const harness_command&) = delete;

  const char* path() const noexcept { return args_.front().c_str(); }
  char* const* argv() const noexcept { return argv_.data(); }
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

private:
  std::vector<std::string> args_;
  std::vector<char*> argv_;
  int kept_fds_[4];
  int kept_fd_count_ = 3;
  int control_fd_ = -1;
  sandbox_setup* sandbox_ = nullptr;
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

} // namespace castellan::worker
