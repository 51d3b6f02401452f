#pragma once

/// @file splice_pump.hpp
/// One direction of a CONNECT tunnel moved by the kernel: splice(2) from the
/// source socket into a pipe and from the pipe into the destination socket,
/// so the bytes never enter the proxy's memory. Readiness comes from the
/// sockets' async_wait on the proxy's io_context; a pump yields to the
/// io_context after every few hundred KiB so that one fast stream cannot
/// starve the other connections on the same thread.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include <asio/ip/tcp.hpp>

#include "ipc/unique_fd.hpp"

namespace castellan::proxy {

class splice_pump {
public:
  /// Called with each amount moved into the pipe; false stops the pump
  /// (the caller has closed the sockets).
  using bytes_callback = std::function<bool(std::size_t)>;
  /// Called once at the end: `eof` when the source closed cleanly and
  /// everything was delivered, else `why` says what failed.
  using done_callback = std::function<void(bool eof, const std::string& why)>;

  splice_pump(asio::ip::tcp::socket& from, asio::ip::tcp::socket& to);

  /// Creates the pipe; false when it cannot (out of fds): the caller then
  /// copies through a buffer instead.
  bool open();

  /// Starts moving; `keep_alive` is held by every pending operation.
  void start(std::shared_ptr<void> keep_alive, bytes_callback on_bytes, done_callback on_done);

private:
  void step();
  void finish(bool eof, const std::string& why);

  asio::ip::tcp::socket& from_;
  asio::ip::tcp::socket& to_;
  unique_fd pipe_read_;
  unique_fd pipe_write_;
  std::size_t chunk_ = 64 * 1024;
  std::size_t pending_ = 0; ///< bytes in the pipe
  bool eof_ = false;
  bool done_ = false;
  std::shared_ptr<void> keep_alive_;
  bytes_callback on_bytes_;
  done_callback on_done_;
};

} // namespace castellan::proxy
