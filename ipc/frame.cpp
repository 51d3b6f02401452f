/// @file frame.cpp
/// Frame encoding and the hostile-input decoder.

#include "ipc/frame.hpp"

#include <cstring>

namespace castellan::ipc {

uint32_t load_le32(const void* p) noexcept {
  unsigned char b[4];
  std::memcpy(b, p, 4);
  return static_cast<uint32_t>(b[0]) | (static_cast<uint32_t>(b[1]) << 8) |
         (static_cast<uint32_t>(b[2]) << 16) | (static_cast<uint32_t>(b[3]) << 24);
}

void store_le32(void* p, uint32_t v) noexcept {
  const unsigned char b[4] = {
      static_cast<unsigned char>(v),
      static_cast<unsigned char>(v >> 8),
      static_cast<unsigned char>(v >> 16),
      static_cast<unsigned char>(v >> 24),
  };
  std::memcpy(p, b, 4);
}

void encode_frame(message_type type, uint32_t request_id, std::string_view payload,
                  std::string& out) {
  char header[frame_header_size];
  store_le32(header, static_cast<uint32_t>(frame_min_len + payload.size()));
  header[4] = static_cast<char>(type);
  store_le32(header + 5, request_id);
  out.reserve(out.size() + frame_header_size + payload.size());
  out.append(header, frame_header_size);
  out.append(payload.data(), payload.size());
}

outcome<frame> decode_frame(std::string_view bytes) {
  if (bytes.size() < frame_header_size)
    return logic_failure("frame of " + std::to_string(bytes.size()) +
                         " bytes is shorter than its 9-byte header");
  const uint32_t len = load_le32(bytes.data());
  if (len < frame_min_len)
    return logic_failure("frame len " + std::to_string(len) + " is below the minimum of 5");
  // 64-bit arithmetic: `4 + len` must not wrap for len near 2^32.
  if (uint64_t{4} + len != bytes.size())
    return logic_failure("frame len " + std::to_string(len) + " disagrees with the " +
                         std::to_string(bytes.size()) + " bytes of the frame");
  const auto raw_type = static_cast<uint8_t>(bytes[4]);
  const auto type = to_message_type(raw_type);
  if (!type)
    return logic_failure("frame type " + std::to_string(raw_type) + " is unknown");
  frame f;
  f.type = *type;
  f.request_id = load_le32(bytes.data() + 5);
  f.payload.assign(bytes.substr(frame_header_size));
  return f;
}

} // namespace castellan::ipc
