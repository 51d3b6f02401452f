#pragma once

/// @file uring.hpp
/// Sole owner of one io_uring instance (liburing).

#include <liburing.h>

#include "ipc/result.hpp"

namespace castellan::platform {

class uring {
public:
  /// A ring with `entries` submission slots (the completion queue is twice that).
  static outcome<uring> create(unsigned entries);

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
};

} // namespace castellan::platform
