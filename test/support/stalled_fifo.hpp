#pragma once

/// @file stalled_fifo.hpp
/// A FIFO nobody reads yet: a disk that stalls, for tests of what writes
/// to it. Its read end is open (so a writer's open(2) does not wait) and not
/// read until drain(); then a thread reads it to the end, counting lines.
/// Destroyed, it stops that thread and closes the read end, so a writer
/// still blocked fails with EPIPE instead of hanging the test's shutdown.

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdint>
#include <string>
#include <thread>

#include <boost/test/unit_test.hpp>

namespace castellan::test {

class stalled_fifo {
public:
  /// Makes the FIFO at `path`; `pipe_bytes` (0: the kernel's default) sets
  /// how much a writer gets in before it blocks.
  explicit stalled_fifo(std::string path, int pipe_bytes = 0) : path_(std::move(path)) {
    ::signal(SIGPIPE, SIG_IGN);
    BOOST_REQUIRE(::mkfifo(path_.c_str(), 0600) == 0);
    reader_ = ::open(path_.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    BOOST_REQUIRE(reader_ >= 0);
    if (pipe_bytes > 0)
      ::fcntl(reader_, F_SETPIPE_SZ, pipe_bytes);
    stop_ = ::eventfd(0, EFD_CLOEXEC);
    BOOST_REQUIRE(stop_ >= 0);
  }

  stalled_fifo(const stalled_fifo&) = delete;
  stalled_fifo& operator=(const stalled_fifo&) = delete;

  ~stalled_fifo() {
    const uint64_t one = 1;
    [[maybe_unused]] const auto n = ::write(stop_, &one, sizeof(one));
    if (drainer_.joinable())
      drainer_.join();
    ::close(reader_);
    ::close(stop_);
  }

  const std::string& path() const noexcept { return path_; }

  /// Starts reading everything written, until every writer has closed it.
  void drain() {
    drainer_ = std::thread([this] {
      char buf[65536];
      for (;;) {
        pollfd fds[2] = {{reader_, POLLIN, 0}, {stop_, POLLIN, 0}};
        if (::poll(fds, 2, -1) < 0 || fds[1].revents != 0)
          return;
        const auto n = ::read(reader_, buf, sizeof(buf));
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
          return; // every writer closed it
        for (ssize_t i = 0; i < n; ++i)
          lines_ += buf[i] == '\n' ? 1 : 0;
      }
    });
  }

  /// Waits until every writer has closed the FIFO (drain() first): the
  /// lines read.
  uint64_t lines_at_end() {
    if (drainer_.joinable())
      drainer_.join();
    return lines_;
  }

private:
  std::string path_;
  int reader_ = -1;
  int stop_ = -1;
  std::thread drainer_;
  std::atomic<uint64_t> lines_{0};
};

} // namespace castellan::test
