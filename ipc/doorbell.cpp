/// @file doorbell.cpp
/// eventfd doorbells: non-blocking in both directions.

#include "ipc/doorbell.hpp"

#include <sys/eventfd.h>

#include <cerrno>

namespace castellan::ipc {

outcome<doorbell> doorbell::create() {
  const int fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (fd < 0)
    return errno_failure("eventfd");
  return doorbell{unique_fd{fd}};
}

outcome<void> doorbell::ring() const {
  const uint64_t one = 1;
  for (;;) {
    const ssize_t n = ::write(fd_.get(), &one, sizeof one);
    if (n == static_cast<ssize_t>(sizeof one))
      return {};
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0 && errno == EAGAIN)
      return failure{EAGAIN, "doorbell " + std::to_string(fd_.get()) +
                                 " is saturated (the other side never drains it)"};
    if (n < 0)
      return errno_failure("write doorbell " + std::to_string(fd_.get()));
    return logic_failure("short write to doorbell " + std::to_string(fd_.get()));
  }
}

uint64_t doorbell::drain() const noexcept {
  uint64_t value = 0;
  for (;;) {
    const ssize_t n = ::read(fd_.get(), &value, sizeof value);
    if (n == static_cast<ssize_t>(sizeof value))
      return value;
    if (n < 0 && errno == EINTR)
      continue;
    // EAGAIN: already clear. Anything else cannot be acted on here; the
    // caller re-checks its ring after draining anyway.
    return 0;
  }
}

} // namespace castellan::ipc
