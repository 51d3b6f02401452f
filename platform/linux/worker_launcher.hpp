#pragma once

/// @file worker_launcher.hpp
/// The pool's handle on its launcher: castellan-launcher, a process that has
/// initialised the interpreter and imported the harness once, and starts
/// each new sandboxed worker by cloning itself into the worker's namespaces
/// instead of exec'ing castellan-worker and then Python (worker/
/// launcher_main.cpp). The sandbox is built for every worker exactly as an
/// exec'd one builds it; what is shared is the interpreter's initialised
/// memory, copy-on-write.
///
/// The launcher runs only castellan's code, never a request's: it is a
/// plain child of the supervisor (its uid, no sandbox, dies with it). The
/// workers it clones are the supervisor's children (CLONE_PARENT): the pool
/// reaps them and they die with the supervisor, as exec'd workers do.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/spawn_worker.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

class worker_launcher {
public:
  struct options {
    std::string binary;            ///< castellan-launcher
    std::string python;            ///< the interpreter it embeds as (sys.executable)
    std::string harness;           ///< castellan_harness.py, on the host
    std::vector<std::string> env;  ///< its environment (the workers' base environment)
    int stderr_fd = -1;            ///< its fd 2 (-1: /dev/null)
    /// How long its interpreter may take to start, and a worker to be
    /// answered for.
    std::chrono::milliseconds timeout{20'000};
  };

  /// Starts the launcher and waits for its announcement.
  static outcome<std::unique_ptr<worker_launcher>> start(options opts);

  /// Closes the launcher's socket (it exits) and reaps it.
  ~worker_launcher();
  worker_launcher(const worker_launcher&) = delete;
  worker_launcher& operator=(const worker_launcher&) = delete;

  /// Starts a sandboxed worker from `spec` (as spawn_worker would, without
  /// its exec). A launcher that has died is started again once, and the
  /// request retried.
  outcome<spawned_worker> spawn(const worker_spec& spec);

  /// The launcher process (for tests and diagnostics).
  pid_t pid() const noexcept { return pid_; }
  /// How many times it was started (1 + restarts).
  unsigned starts() const noexcept { return starts_; }

private:
  explicit worker_launcher(options opts) : opts_(std::move(opts)) {}
  outcome<void> launch();
  void stop() noexcept;
  /// One request and its answer; `dead` is set when the launcher is gone.
  outcome<spawned_worker> request(const std::string& text, const worker_spec& spec, bool& dead);
  /// Waits for one message from the launcher (up to the timeout).
  outcome<void> wait_readable();

  options opts_;
  unique_fd socket_;
  unique_fd pidfd_;
  pid_t pid_ = -1;
  unsigned starts_ = 0;
};

} // namespace castellan::platform
