/// @file fuzz_frame_decoder.cpp
/// libFuzzer target for the hostile-input side of the wire.
///
/// The input is used twice:
///  1. as one encoded frame for decode_frame (a decoded frame must re-encode
///     to exactly the input);
///  2. as the image of a hostile worker's ring: bytes 0..3 are the consumer
///     `head`, 4..7 the producer `tail`, the rest the data area of the
///     to_supervisor ring. A ring_reader drains it; every frame it returns
///     must be well-formed, and it must stop (empty or corrupt) within
///     capacity / 9 reads. A ring_writer then writes against a head taken
///     from the input and must never publish past the capacity.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>

#include "ipc/frame.hpp"
#include "ipc/ring.hpp"
#include "ipc/segment.hpp"

using namespace castellan::ipc;

namespace {

constexpr uint32_t capacity = 4096;

segment& shared_segment() {
  // One segment for the whole run: creating a memfd per input would dominate
  // the time; the input overwrites every byte that matters.
  static segment seg = [] {
    auto s = segment::create(capacity);
    if (!s)
      std::abort();
    return std::move(*s);
  }();
  return seg;
}

void check(bool ok) {
  if (!ok)
    std::abort();
}

void fuzz_decode(std::string_view input) {
  auto f = decode_frame(input);
  if (!f)
    return;
  check(f->payload.size() + frame_header_size == input.size());
  std::string again;
  encode_frame(f->type, f->request_id, f->payload, again);
  check(again == input);
}

void fuzz_reader(segment& seg, const uint8_t* data, std::size_t size) {
  const direction dir = direction::to_supervisor;
  uint32_t head = 0;
  uint32_t tail = 0;
  if (size >= 8) {
    head = load_le32(data);
    tail = load_le32(data + 4);
    data += 8;
    size -= 8;
  }
  std::byte* area = seg.data(dir);
  const std::size_t n = size < capacity ? size : capacity;
  std::memcpy(area, data, n);
  std::memset(area + n, 0, capacity - n);
  __atomic_store_n(seg.head_word(dir), head, __ATOMIC_RELEASE);
  __atomic_store_n(seg.tail_word(dir), tail, __ATOMIC_RELEASE);

  ring_reader reader{seg, dir};
  uint64_t consumed = 0;
  for (uint32_t reads = 0;; ++reads) {
    check(reads <= capacity / frame_header_size);
    auto r = reader.read();
    if (r.status == ring_status::empty) {
      check(consumed == static_cast<uint32_t>(tail - head));
      break;
    }
    if (r.status == ring_status::corrupt) {
      check(!r.error.empty());
      break;
    }
    check(r.status == ring_status::ok);
    check(to_message_type(static_cast<uint8_t>(r.value.type)).has_value());
    consumed += frame_header_size + r.value.payload.size();
    check(consumed <= capacity);
    check(__atomic_load_n(seg.head_word(dir), __ATOMIC_ACQUIRE) ==
          static_cast<uint32_t>(head + consumed));
  }

  // The writer against a hostile consumer head (to_worker: the worker owns
  // `head`). Whatever it says, the tail it publishes stays within capacity
  // of that head.
  const direction wdir = direction::to_worker;
  __atomic_store_n(seg.tail_word(wdir), tail, __ATOMIC_RELEASE);
  __atomic_store_n(seg.head_word(wdir), head, __ATOMIC_RELEASE);
  ring_writer writer{seg, wdir};
  const std::string_view payload(reinterpret_cast<const char*>(data), n / 2);
  const auto st = writer.write(message_type::code, 1, payload);
  const uint32_t new_tail = __atomic_load_n(seg.tail_word(wdir), __ATOMIC_ACQUIRE);
  if (st == ring_status::ok) {
    check(new_tail == static_cast<uint32_t>(tail + frame_header_size + payload.size()));
    check(static_cast<uint32_t>(new_tail - head) <= capacity);
  } else {
    check(new_tail == tail);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  fuzz_decode(std::string_view(reinterpret_cast<const char*>(data), size));
  fuzz_reader(shared_segment(), data, size);
  return 0;
}
