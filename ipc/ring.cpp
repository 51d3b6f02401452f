/// @file ring.cpp
/// The SPSC byte ring (docs/wire.md). Our own index is kept in a member and
/// is authoritative; the other side's index is loaded once per operation
/// (acquire), validated, and never trusted beyond that.

#include "ipc/ring.hpp"

#include <algorithm>
#include <cstring>

namespace castellan::ipc {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the index words are accessed natively and are little-endian on the wire");

namespace {

uint32_t load_acquire(const uint32_t* word) noexcept {
  return __atomic_load_n(word, __ATOMIC_ACQUIRE);
}

void store_release(uint32_t* word, uint32_t value) noexcept {
  __atomic_store_n(word, value, __ATOMIC_RELEASE);
}

/// Copies `n` bytes into the ring's data area starting at stream position
/// `pos`, wrapping at the end. `n <= capacity` is the caller's invariant.
void copy_in(std::byte* data, uint32_t capacity, uint32_t pos, const void* src,
             std::size_t n) noexcept {
  const uint32_t offset = pos & (capacity - 1);
  const std::size_t first = std::min<std::size_t>(n, capacity - offset);
  std::memcpy(data + offset, src, first);
  std::memcpy(data, static_cast<const char*>(src) + first, n - first);
}

/// Copies `n` bytes out of the ring's data area from stream position `pos`.
void copy_out(const std::byte* data, uint32_t capacity, uint32_t pos, void* dst,
              std::size_t n) noexcept {
  const uint32_t offset = pos & (capacity - 1);
  const std::size_t first = std::min<std::size_t>(n, capacity - offset);
  std::memcpy(dst, data + offset, first);
  std::memcpy(static_cast<char*>(dst) + first, data, n - first);
}

} // namespace

// --- writer ------------------------------------------------------------------

ring_writer::ring_writer(segment& seg, direction dir) noexcept
    : seg_(&seg), dir_(dir), tail_(__atomic_load_n(seg.tail_word(dir), __ATOMIC_RELAXED)) {}

ring_status ring_writer::write(message_type type, uint32_t request_id,
                               std::string_view payload) noexcept {
  if (payload.size() > max_payload())
    return ring_status::corrupt;
  const uint32_t capacity = seg_->capacity();
  const uint32_t head = load_acquire(seg_->head_word(dir_));
  const uint32_t used = tail_ - head; // mod 2^32 by design
  if (used > capacity)
    return ring_status::corrupt;
  const auto frame_size = static_cast<uint32_t>(frame_header_size + payload.size());
  if (frame_size > capacity - used)
    return ring_status::full;
  char header[frame_header_size];
  store_le32(header, static_cast<uint32_t>(frame_min_len + payload.size()));
  header[4] = static_cast<char>(type);
  store_le32(header + 5, request_id);
  std::byte* data = seg_->data(dir_);
  copy_in(data, capacity, tail_, header, frame_header_size);
  copy_in(data, capacity, tail_ + static_cast<uint32_t>(frame_header_size), payload.data(),
          payload.size());
  tail_ += frame_size;
  store_release(seg_->tail_word(dir_), tail_);
  return ring_status::ok;
}

uint32_t ring_writer::free_bytes() const noexcept {
  const uint32_t used = tail_ - load_acquire(seg_->head_word(dir_));
  const uint32_t capacity = seg_->capacity();
  return used > capacity ? 0 : capacity - used;
}

uint32_t ring_writer::used_bytes() const noexcept {
  const uint32_t used = tail_ - load_acquire(seg_->head_word(dir_));
  return std::min(used, seg_->capacity());
}

uint32_t ring_writer::max_payload() const noexcept {
  return seg_->capacity() - static_cast<uint32_t>(frame_header_size);
}

// --- reader ------------------------------------------------------------------

ring_reader::ring_reader(segment& seg, direction dir) noexcept
    : seg_(&seg), dir_(dir), head_(__atomic_load_n(seg.head_word(dir), __ATOMIC_RELAXED)) {}

read_result ring_reader::read() {
  read_result r;
  const uint32_t capacity = seg_->capacity();
  const uint32_t tail = load_acquire(seg_->tail_word(dir_));
  const uint32_t used = tail - head_;
  if (used == 0)
    return r; // empty
  r.status = ring_status::corrupt;
  if (used > capacity) {
    r.error = "ring holds " + std::to_string(used) + " bytes (tail " + std::to_string(tail) +
              " - head " + std::to_string(head_) + ") but its capacity is " +
              std::to_string(capacity);
    return r;
  }
  // The producer publishes whole frames only, so a partial header is corrupt.
  if (used < frame_header_size) {
    r.error = "ring holds " + std::to_string(used) + " bytes, less than a frame header";
    return r;
  }
  const std::byte* data = seg_->data(dir_);
  unsigned char len_bytes[4];
  copy_out(data, capacity, head_, len_bytes, sizeof len_bytes);
  const uint32_t len = load_le32(len_bytes);
  const uint64_t frame_size = uint64_t{4} + len; // cannot wrap in 64 bits
  if (len < frame_min_len) {
    r.error = "frame len " + std::to_string(len) + " is below the minimum of 5";
    return r;
  }
  if (frame_size > capacity) {
    r.error = "frame len " + std::to_string(len) + " exceeds the ring capacity " +
              std::to_string(capacity);
    return r;
  }
  if (frame_size > used) {
    r.error = "frame len " + std::to_string(len) + " exceeds the " + std::to_string(used) +
              " bytes published";
    return r;
  }
  // Copy the whole frame (its length included) out before parsing it: the
  // producer may rewrite these bytes at any time, and decode_frame checks
  // that the copied length still matches what was validated above.
  scratch_.resize(static_cast<std::size_t>(frame_size));
  copy_out(data, capacity, head_, scratch_.data(), scratch_.size());
  auto decoded = decode_frame(scratch_);
  if (!decoded) {
    r.error = decoded.error().message;
    return r;
  }
  head_ += static_cast<uint32_t>(frame_size);
  store_release(seg_->head_word(dir_), head_);
  r.status = ring_status::ok;
  r.value = std::move(*decoded);
  return r;
}

uint32_t ring_reader::used_bytes() const noexcept {
  const uint32_t used = load_acquire(seg_->tail_word(dir_)) - head_;
  return std::min(used, seg_->capacity());
}

} // namespace castellan::ipc
