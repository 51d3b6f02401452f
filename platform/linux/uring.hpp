#pragma once

/// @file uring.hpp
/// Sole owner of one io_uring instance (liburing).

#include <liburing.h>

#include "ipc/outcome.hpp"

namespace castellan::platform {

class uring {
public:
  /// A ring with `entries` submission slots (the completion queue is twice that).
  static outcome<uring> create(unsigned entries);

  /// A ring that only one thread submits to and waits on, whose completions
  /// run when that thread waits for them (IORING_SETUP_SINGLE_ISSUER |
  /// IORING_SETUP_DEFER_TASKRUN, Linux 6.1): io_uring then never interrupts
  /// the thread's other blocking calls with task work, as it does a plain
  /// ring's. Created disabled: that thread calls adopt() before anything
  /// else. On an older kernel, a plain ring (defers_task_work() is false).
  static outcome<uring> create_single_issuer(unsigned entries);

  /// Makes the calling thread the one submitter of a create_single_issuer()
  /// ring (a no-op for a plain ring).
  outcome<void> adopt();

  /// Whether completions wait for the submitting thread (see above).
  bool defers_task_work() const noexcept { return deferred_; }

  uring(uring&& other) noexcept;
  uring& operator=(uring&&) = delete;
  uring(const uring&) = delete;
  uring& operator=(const uring&) = delete;
  ~uring();

  io_uring* get() noexcept { return &ring_; }

  /// A free submission entry, submitting queued ones first if the queue is full.
  io_uring_sqe* next_sqe();

private:
  uring() noexcept = default;
  io_uring ring_{};
  bool live_ = false;
  bool deferred_ = false; ///< SINGLE_ISSUER | DEFER_TASKRUN
  bool disabled_ = false; ///< created disabled, not adopted yet
};

} // namespace castellan::platform
