#pragma once

/// @file audit_credits.hpp
/// A producer's side of the audit's flow control. CAF 0.17 mailboxes have no
/// bound, and audit events are fire-and-forget, so the audit actor lends each
/// producer that joins it (`audit_join_atom`) a window of events: every event
/// posted spends one credit, and the audit actor returns credits
/// (`audit_credit_atom`) in batches as it handles them, but not while its
/// writer queue is congested. A producer whose credits are spent holds new
/// work back (the pool answers new requests `busy`) yet still posts the
/// events of work already admitted: nothing is dropped. Credits are messages,
/// so the same flow works for a producer on another node.
///
/// Owned by one actor; no synchronisation.

#include <algorithm>
#include <cstdint>

namespace castellan {

class audit_credits {
public:
  /// The window a producer assumes until the audit actor's answer to its
  /// join names the real one (audit_config::producer_window).
  static constexpr uint64_t default_window = 2048;

  /// The audit actor's answer to the join.
  void set_window(uint64_t window) noexcept { window_ = std::max<uint64_t>(window, 1); }

  /// One event posted.
  void spent() noexcept { high_water_ = std::max(high_water_, ++outstanding_); }

  /// `n` events handled by the audit actor. More than are outstanding (a
  /// confused or hostile peer) never takes the count below zero.
  void returned(uint64_t n) noexcept { outstanding_ -= std::min(n, outstanding_); }

  /// True when the window is spent: hold new work back.
  bool exhausted() const noexcept { return outstanding_ >= window_; }

  uint64_t outstanding() const noexcept { return outstanding_; }
  uint64_t window() const noexcept { return window_; }
  /// The most events ever outstanding at once.
  uint64_t high_water() const noexcept { return high_water_; }

private:
  uint64_t window_ = default_window;
  uint64_t outstanding_ = 0;
  uint64_t high_water_ = 0;
};

} // namespace castellan
