#pragma once

/// @file spawn_worker.hpp
/// The one way castellan starts a worker process.

#include <sys/types.h>

#include "ipc/result.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// A started worker: its pid and a pidfd (poll it to learn of its exit,
/// signal through it without pid-reuse races).
struct spawned_worker {
  pid_t pid = -1;
  unique_fd pidfd;
};

/// Starts `spec` or says precisely why not (errno and the step that failed).
/// A spec that asks for isolation this backend cannot apply is refused.
outcome<spawned_worker> spawn_worker(const worker_spec& spec);

} // namespace castellan::platform
