#pragma once

/// @file doorbell.hpp
/// An eventfd that one side rings after publishing frames.

#include <cstdint>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::ipc {

class doorbell {
public:
  /// A new eventfd, `EFD_NONBLOCK | EFD_CLOEXEC`.
  static outcome<doorbell> create();
  /// Adopts an inherited eventfd (the worker side).
  explicit doorbell(unique_fd fd) noexcept : fd_(std::move(fd)) {}

  int fd() const noexcept { return fd_.get(); }

  /// Adds 1 to the counter. A counter the other side saturated (EAGAIN) is a
  /// failure, not a block: a hostile worker cannot stall the supervisor.
  outcome<void> ring() const;

  /// Reads and clears the counter; 0 when it was already clear.
  uint64_t drain() const noexcept;

private:
  unique_fd fd_;
};

} // namespace castellan::ipc
