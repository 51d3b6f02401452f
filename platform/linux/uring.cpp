#include "platform/linux/uring.hpp"

#include <cstring>

namespace castellan::platform {

outcome<uring> uring::create(unsigned entries) {
  uring r;
  if (int rc = io_uring_queue_init(entries, &r.ring_, 0); rc < 0)
    return errno_failure("io_uring_queue_init", -rc);
  r.live_ = true;
  return r;
}

uring::uring(uring&& other) noexcept : ring_(other.ring_), live_(other.live_) {
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
