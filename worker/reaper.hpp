#pragma once

/// @file reaper.hpp
/// The worker as PID 1 (or a child subreaper outside a pid namespace): it
/// forwards termination signals to the harness, reaps every child (orphans
/// included), and turns the harness's end into its own exit code.

#include <signal.h>
#include <sys/types.h>

#include "ipc/outcome.hpp"

namespace castellan::worker {

class egress_relay;

/// Orphaned descendants are re-parented to this process, so that it reaps
/// them (PR_SET_CHILD_SUBREAPER). As PID 1 of a pid namespace this is
/// implied; outside one (tests, the portable backend) it is what makes the
/// worker reap what the harness's children leave behind.
outcome<void> become_subreaper();

/// Sets SIGTERM, SIGINT, SIGHUP and SIGCHLD to their default action (an
/// ignored signal would be discarded even while blocked) and blocks them, so
/// that supervise_harness() takes them synchronously. Returns the previous
/// mask, which the harness gets back.
outcome<sigset_t> block_worker_signals();

/// Waits until the harness has exited, in one poll() loop over a signalfd
/// and, when the sandbox has network, the egress relay's listener: forwards
/// SIGTERM, SIGINT and SIGHUP to the harness, reaps every child on SIGCHLD,
/// and passes accepted connections to the proxy (`relay` may be null).
/// Returns the harness's exit status, or 128 + the signal that ended it.
int supervise_harness(pid_t harness, egress_relay* relay = nullptr);

/// A wait status as a shell exit code: the exit status, or 128 + signal.
int exit_code_of(int wait_status) noexcept;

} // namespace castellan::worker
