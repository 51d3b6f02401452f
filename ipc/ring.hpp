#pragma once

/// @file ring.hpp
/// The SPSC byte ring over a segment. Both ends treat every index written by
/// the other side as hostile: it is loaded once, validated, and a bad value is
/// reported as `ring_status::corrupt`, never trusted.

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/frame.hpp"
#include "ipc/segment.hpp"

namespace castellan::ipc {

enum class ring_status : uint8_t {
  ok,      ///< a frame was written / read
  empty,   ///< nothing to read
  full,    ///< not enough free space for this frame right now
  corrupt, ///< the other side wrote an impossible index or frame
};

/// The producer end of one direction. Not thread-safe (single producer).
class ring_writer {
public:
  ring_writer(segment& seg, direction dir) noexcept;

  /// Writes one frame, wrapping at the end of the data area, and publishes it
  /// with a release store of `tail`. `full` if it does not fit now; `corrupt`
  /// if the consumer's `head` is impossible; a frame larger than the ring can
  /// ever hold is `corrupt` too (see `max_payload()`).
  ring_status write(message_type type, uint32_t request_id, std::string_view payload) noexcept;

  /// Free bytes as of now, or 0 when the consumer's index is corrupt.
  uint32_t free_bytes() const noexcept;
  /// Bytes in use as of now (what a fill-level gauge shows).
  uint32_t used_bytes() const noexcept;
  /// The largest payload a single frame may carry in this ring.
  uint32_t max_payload() const noexcept;

private:
  segment* seg_;
  direction dir_;
  uint32_t tail_; ///< our own index, the authoritative copy
};

/// What `ring_reader::read` found.
struct read_result {
  ring_status status = ring_status::empty;
  frame value;       ///< valid when status == ok
  std::string error; ///< names the bad field and value when status == corrupt
};

/// The consumer end of one direction. Not thread-safe (single consumer).
class ring_reader {
public:
  ring_reader(segment& seg, direction dir) noexcept;

  /// Reads the next frame: copies it out of shared memory, then validates and
  /// decodes the copy, then releases the space (release store of `head`).
  read_result read();

  /// Bytes in use as of now (what a fill-level gauge shows).
  uint32_t used_bytes() const noexcept;

private:
  segment* seg_;
  direction dir_;
  uint32_t head_; ///< our own index, the authoritative copy
  std::string scratch_;
};

} // namespace castellan::ipc
