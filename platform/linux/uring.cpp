#include "platform/linux/uring.hpp"

#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace castellan::platform {

outcome<uring> uring::create(unsigned entries) {
  uring r;
  if (int rc = io_uring_queue_init(entries, &r.ring_, 0); rc < 0)
    return errno_failure("io_uring_queue_init", -rc);
  r.live_ = true;
  return r;
}

outcome<uring> uring::create_single_issuer(unsigned entries) {
  uring r;
  const unsigned flags =
    IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_R_DISABLED;
  int rc = io_uring_queue_init(entries, &r.ring_, flags);
  if (rc == -EINVAL) // before 6.1: a plain ring
    return create(entries);
  if (rc < 0)
    return errno_failure("io_uring_queue_init", -rc);
  r.live_ = true;
  r.deferred_ = true;
  r.disabled_ = true;
  return r;
}

outcome<void> uring::adopt() {
  if (!disabled_)
    return {};
  // Enabling a SINGLE_ISSUER ring makes the caller its submitter. The raw
  // call: Debian's liburing.so does not export io_uring_enable_rings.
  if (::syscall(__NR_io_uring_register, ring_.ring_fd, IORING_REGISTER_ENABLE_RINGS, nullptr, 0) <
      0)
    return errno_failure("io_uring_register(IORING_REGISTER_ENABLE_RINGS)");
  disabled_ = false;
  return {};
}

uring::uring(uring&& other) noexcept
  : ring_(other.ring_), live_(other.live_), deferred_(other.deferred_),
    disabled_(other.disabled_) {
  other.live_ = false;
  std::memset(&other.ring_, 0, sizeof other.ring_);
}

uring::~uring() {
  if (live_)
    io_uring_queue_exit(&ring_);
}

io_uring_sqe* uring::next_sqe() {
  io_uring_sqe* sqe = io_uring_get_sqe(&ring_);
  if (sqe == nullptr) {
    io_uring_submit(&ring_);
    sqe = io_uring_get_sqe(&ring_);
  }
  return sqe;
}

} // namespace castellan::platform
