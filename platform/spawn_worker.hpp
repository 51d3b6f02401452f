#pragma once

/// @file spawn_worker.hpp
/// The one way castellan starts a worker process.

#include <sys/types.h>

#include <functional>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// A started worker: its pid and a pidfd (poll it to learn of its exit,
/// signal through it without pid-reuse races).
struct spawned_worker {
  pid_t pid = -1;
  unique_fd pidfd;
};

/// A start without exec, for the launcher (worker/launcher_main.cpp): the
/// child runs `main(argc, argv)` of the caller's own image with the spec's
/// argv, environment and fds (every other fd is closed, not just marked
/// close-on-exec), then exits with its result. `spec.executable` is not run.
struct in_process_start {
  int (*main)(int argc, char** argv) = nullptr;
  /// The child becomes a child of the caller's parent (CLONE_PARENT).
  bool sibling = false;
  /// Told the child's pid as soon as it exists: a sibling's parent must
  /// learn it even if the start-up then fails (it reaps the child).
  std::function<void(pid_t)> on_cloned;
};

/// Starts `spec` or says precisely why not (errno and the step that failed).
/// A spec that asks for isolation this backend cannot apply is refused.
/// `in_process` (sandboxed specs only) replaces the exec, as described above.
outcome<spawned_worker> spawn_worker(const worker_spec& spec,
                                     const in_process_start* in_process = nullptr);

} // namespace castellan::platform
