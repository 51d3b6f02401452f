#pragma once

/// @file interrupt_canceller.hpp
/// `castellan exec` / `run` on Ctrl-C: SIGINT becomes a cancel of the
/// running exec (the supervisor kills its worker and answers `cancelled`,
/// exit 125), so the user still gets the output produced so far and nothing
/// of the exec outlives the CLI.

#include <signal.h>

#include <cstdint>
#include <optional>
#include <thread>

#include <caf/actor_system.hpp>

#include "actors/supervisor/supervisor_actor.hpp"
#include "ipc/doorbell.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::cli {

/// Blocks SIGINT in the calling thread and in every thread started after it
/// (create it before the actor system), and restores the mask when it goes.
class sigint_block {
public:
  sigint_block();
  sigint_block(const sigint_block&) = delete;
  sigint_block& operator=(const sigint_block&) = delete;
  ~sigint_block();

private:
  sigset_t saved_;
};

/// While alive, a thread turns every SIGINT (pending ones included) into
/// `cancel_atom, exec_id` to the supervisor. SIGINT must be blocked in every
/// thread (sigint_block); start it after the exec request was sent, so that
/// the cancel is queued behind it.
class interrupt_canceller {
public:
  interrupt_canceller(caf::actor_system& sys, supervisor_actor sup, uint64_t exec_id);
  interrupt_canceller(const interrupt_canceller&) = delete;
  interrupt_canceller& operator=(const interrupt_canceller&) = delete;
  ~interrupt_canceller();

private:
  void run(caf::actor_system& sys, supervisor_actor sup, uint64_t exec_id);

  unique_fd signals_;
  std::optional<ipc::doorbell> stop_;
  std::thread thread_;
};

} // namespace castellan::cli
