#pragma once

/// @file audit_pressure.hpp
/// How far behind the audit is, readable from any thread: events posted to
/// the audit actor and not yet handled (its backlog), and records waiting in
/// the file sink's writer queue. CAF 0.17 mailboxes have no bound of their
/// own, and the producers' sends are fire-and-forget; producers that can hold
/// work back (the pool's admission of new execs, a flood test) consult
/// `saturated()` before they create more events, which is what bounds the
/// audit actor's mailbox as the writer queue's bound bounds the sink.

#include <atomic>
#include <cstdint>

namespace castellan {

class audit_pressure {
public:
  /// `backlog_limit`: events in flight to the actor beyond which it is saturated.
  explicit audit_pressure(uint64_t backlog_limit = 4096) : backlog_limit_(backlog_limit) {}

  /// Records waiting in the writer queue.
  uint64_t queued() const noexcept { return queued_.load(std::memory_order_relaxed); }
  /// The writer queue's bound in records (0 until a file sink is attached).
  uint64_t capacity() const noexcept { return capacity_.load(std::memory_order_relaxed); }
  /// The most records ever queued at once.
  uint64_t high_water() const noexcept { return high_water_.load(std::memory_order_relaxed); }

  /// Events posted (through `posted()`) and not yet handled by the actor.
  uint64_t backlog() const noexcept { return backlog_.load(std::memory_order_relaxed); }
  /// The largest backlog seen.
  uint64_t backlog_high_water() const noexcept {
    return backlog_high_.load(std::memory_order_relaxed);
  }
  uint64_t backlog_limit() const noexcept { return backlog_limit_; }

  /// True when the writer queue is at least three quarters full or the
  /// backlog reached its limit: producers should hold new work back.
  bool saturated() const noexcept {
    const auto cap = capacity();
    return (cap > 0 && queued() * 4 >= cap * 3) || backlog() >= backlog_limit_;
  }

  // -- producers ------------------------------------------------------------------

  /// Counts an event about to be sent to the audit actor (see `post_audit`).
  void posted() noexcept { raise(backlog_high_, backlog_.fetch_add(1) + 1); }

  // -- the audit actor ------------------------------------------------------------

  /// Counts an event handled. Events from producers that did not count them
  /// (remote nodes) never take the backlog below zero.
  void consumed() noexcept {
    auto cur = backlog_.load(std::memory_order_relaxed);
    while (cur > 0 && !backlog_.compare_exchange_weak(cur, cur - 1, std::memory_order_relaxed)) {
    }
  }

  // -- the file sink --------------------------------------------------------------

  void set_capacity(uint64_t n) noexcept { capacity_.store(n, std::memory_order_relaxed); }

  void set_queued(uint64_t n) noexcept {
    queued_.store(n, std::memory_order_relaxed);
    raise(high_water_, n);
  }

private:
  static void raise(std::atomic<uint64_t>& hw, uint64_t n) noexcept {
    auto cur = hw.load(std::memory_order_relaxed);
    while (n > cur && !hw.compare_exchange_weak(cur, n, std::memory_order_relaxed)) {
    }
  }

  const uint64_t backlog_limit_;
  std::atomic<uint64_t> queued_{0};
  std::atomic<uint64_t> capacity_{0};
  std::atomic<uint64_t> high_water_{0};
  std::atomic<uint64_t> backlog_{0};
  std::atomic<uint64_t> backlog_high_{0};
};

} // namespace castellan
