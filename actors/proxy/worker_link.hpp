#pragma once

/// @file worker_link.hpp
/// What the proxy knows about one worker: who it is (pool and worker id, so
/// every connection record names them), its policy, the exec running on it,
/// its open connections and the bytes its current exec has moved. A
/// connection belongs to the worker whose AF_UNIX socket it arrived on: the
/// worker cannot claim to be another. Used on the proxy's I/O thread only,
/// except `current_exec`, which the pool writes.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_set>

#include "actors/policy/engine/compiled_policy.hpp"

namespace castellan::proxy {

class egress_session;

struct worker_link {
  std::string pool;
  uint64_t worker_id = 0;
  std::shared_ptr<const policy::compiled_policy> policy;
  /// The exec running on the worker (0 between execs); the pool stores it
  /// before it sends the code, so a connection the code opens sees it.
  std::shared_ptr<const std::atomic<uint64_t>> current_exec;

  uint32_t open_connections = 0;
  std::unordered_set<egress_session*> sessions; ///< to close them when the worker goes
  bool detached = false;

  uint64_t exec_now() const noexcept {
    return current_exec ? current_exec->load(std::memory_order_acquire) : 0;
  }

  /// Counts `n` bytes against the current exec's budget (`limit` 0:
  /// unlimited); false once the budget is exceeded.
  bool charge(uint64_t n, uint64_t limit) noexcept {
    const uint64_t exec = exec_now();
    if (exec != budget_exec_) {
      budget_exec_ = exec;
      budget_used_ = 0;
    }
    budget_used_ += n;
    return limit == 0 || budget_used_ <= limit;
  }

  /// True when the current exec has used up its budget already.
  bool over_budget(uint64_t limit) noexcept { return !charge(0, limit); }

private:
  uint64_t budget_exec_ = 0;
  uint64_t budget_used_ = 0;
};

} // namespace castellan::proxy
