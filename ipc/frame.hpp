#pragma once

/// @file frame.hpp
/// One frame of the worker wire, its encoder and its (hostile-input) decoder.

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/message_type.hpp"
#include "ipc/outcome.hpp"

namespace castellan::ipc {

/// `u32 len | u8 type | u32 request_id`: 9 bytes before the payload.
inline constexpr std::size_t frame_header_size = 9;
/// `len` counts type, request id and payload, so it is at least this.
inline constexpr uint32_t frame_min_len = 5;

struct frame {
  message_type type = message_type::stdout_data;
  uint32_t request_id = 0;
  std::string payload;
};

/// Appends the encoded frame to `out`.
void encode_frame(message_type type, uint32_t request_id, std::string_view payload,
                  std::string& out);

/// Decodes exactly one frame that fills all of `bytes` (header included).
/// Every field is validated: a short buffer, a `len` that disagrees with the
/// buffer size, or an unknown type is a failure naming the field and value.
outcome<frame> decode_frame(std::string_view bytes);

/// Reads the little-endian u32 at `p` (no alignment needed).
uint32_t load_le32(const void* p) noexcept;
/// Writes `v` little-endian at `p` (no alignment needed).
void store_le32(void* p, uint32_t v) noexcept;

} // namespace castellan::ipc
