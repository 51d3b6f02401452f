/// @file splice_pump.cpp
/// See splice_pump.hpp.

#include "actors/proxy/splice_pump.hpp"

#include <fcntl.h>

#include <cerrno>
#include <cstring>

#include <asio/post.hpp>

namespace castellan::proxy {

namespace {

/// Bytes one step may move before it yields to the io_context.
constexpr std::size_t step_budget = 512 * 1024;

} // namespace

splice_pump::splice_pump(asio::ip::tcp::socket& from, asio::ip::tcp::socket& to)
  : from_(from), to_(to) {}

bool splice_pump::open() {
  int p[2];
  if (::pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
    return false;
  pipe_read_.reset(p[0]);
  pipe_write_.reset(p[1]);
  // A larger pipe moves more per system call; the default (64 KiB) is kept
  // when the system refuses.
  const int size = ::fcntl(p[1], F_SETPIPE_SZ, 1 << 20);
  if (size > 0)
    chunk_ = static_cast<std::size_t>(size);
  return true;
}

void splice_pump::start(std::shared_ptr<void> keep_alive, bytes_callback on_bytes,
                        done_callback on_done) {
  keep_alive_ = std::move(keep_alive);
  on_bytes_ = std::move(on_bytes);
  on_done_ = std::move(on_done);
  asio::error_code ec;
  from_.non_blocking(true, ec);
  to_.non_blocking(true, ec);
  step();
}

void splice_pump::finish(bool eof, const std::string& why) {
  if (done_)
    return;
  done_ = true;
  auto done = std::move(on_done_);
  auto keep = std::move(keep_alive_); // released after the callback
  on_bytes_ = nullptr;
  done(eof, why);
}

void splice_pump::step() {
  if (done_)
    return;
  std::size_t moved = 0;
  for (;;) {
    if (!from_.is_open() || !to_.is_open()) {
      finish(false, "closed");
      return;
    }
    bool progressed = false;
    bool write_blocked = false;
    // Out of the pipe first: the receiver's progress frees room for more.
    if (pending_ > 0) {
      const ssize_t n = ::splice(pipe_read_.get(), nullptr, to_.native_handle(), nullptr,
                                 pending_, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        pending_ -= static_cast<std::size_t>(n);
        progressed = true;
      } else if (n < 0 && errno == EINTR) {
        continue;
      } else if (n < 0 && errno == EAGAIN) {
        write_blocked = true;
      } else {
        finish(false, std::string("the receiver stopped reading: ") +
                        (n < 0 ? std::strerror(errno) : "closed"));
        return;
      }
    }
    if (eof_ && pending_ == 0) {
      finish(true, {});
      return;
    }
    // Into the pipe while it has room, even while the receiver is slow: the
    // sender keeps going until the pipe is full.
    if (!eof_ && pending_ < chunk_) {
      if (moved >= step_budget) {
        // Let the other connections on this thread run.
        asio::post(to_.get_executor(), [this, keep = keep_alive_] { step(); });
        return;
      }
      const ssize_t n = ::splice(from_.native_handle(), nullptr, pipe_write_.get(), nullptr,
                                 chunk_ - pending_, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        pending_ += static_cast<std::size_t>(n);
        moved += static_cast<std::size_t>(n);
        progressed = true;
        if (!on_bytes_(static_cast<std::size_t>(n))) {
          finish(false, "stopped");
          return;
        }
      } else if (n == 0) {
        eof_ = true;
        progressed = true;
      } else if (errno == EINTR) {
        continue;
      } else if (errno != EAGAIN) {
        finish(false, std::string("the sender failed: ") + std::strerror(errno));
        return;
      }
    }
    if (progressed)
      continue;
    // Nothing moved: wait for the side that holds things up.
    const bool wait_write = pending_ > 0 && write_blocked;
    auto& socket = wait_write ? to_ : from_;
    socket.async_wait(wait_write ? asio::ip::tcp::socket::wait_write
                                 : asio::ip::tcp::socket::wait_read,
                      [this, keep = keep_alive_](const asio::error_code& ec) {
                        if (ec)
                          finish(false, ec.message());
                        else
                          step();
                      });
    return;
  }
}

} // namespace castellan::proxy
