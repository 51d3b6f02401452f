#pragma once

/// @file interrupt_canceller.hpp
/// `castellan exec` / `run` on Ctrl-C: SIGINT becomes a cancel of the
/// running exec (the supervisor kills its worker and answers `cancelled`,
/// exit 125), so the user still gets the output produced so far and nothing
/// of the exec outlives the CLI. Embedded, the cancel goes to the
/// supervisor; as a client, to the daemon (DELETE /v1/execs/{id}).

#include <signal.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <thread>

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

/// While alive, a thread calls `cancel` for every SIGINT (pending ones
/// included). SIGINT must be blocked in every thread (sigint_block); start
/// it after the exec request was sent, so that the cancel comes behind it.
class interrupt_canceller {
public:
  explicit interrupt_canceller(std::function<void()> cancel);
  interrupt_canceller(const interrupt_canceller&) = delete;
  interrupt_canceller& operator=(const interrupt_canceller&) = delete;
  ~interrupt_canceller();

private:
  void run();

  std::function<void()> cancel_;

  unique_fd signals_;
  std::optional<ipc::doorbell> stop_;
  std::thread thread_;
};

} // namespace castellan::cli
