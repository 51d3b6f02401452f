/// @file ring_test.cpp
/// The ring between well-behaved ends: empty, full, wrap-around, limits.

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>

#include "ipc/ring.hpp"

using namespace castellan::ipc;
using castellan::ipc::message_type;

namespace {

segment make_segment(uint32_t capacity) {
  auto seg = segment::create(capacity);
  BOOST_REQUIRE_MESSAGE(seg.has_value(),
                        (seg.has_value() ? std::string() : seg.error().describe()));
  return std::move(*seg);
}

uint32_t word(uint32_t* w) {
  return __atomic_load_n(w, __ATOMIC_ACQUIRE);
}

std::string pattern(std::size_t n, char seed) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(seed + static_cast<char>(i % 97));
  return s;
}

/// Moves both indices of `dir` to `pos` by writing and reading filler frames.
void advance_to(segment& seg, direction dir, ring_writer& w, ring_reader& r, uint32_t pos) {
  while (word(seg.tail_word(dir)) != pos) {
    const uint32_t gap = pos - word(seg.tail_word(dir));
    // Frames of at most 1000 bytes, never leaving a gap below one header.
    const uint32_t n = gap >= 1009 ? 1000 : (gap > 1000 ? gap - 500 : gap);
    BOOST_REQUIRE(n >= 9);
    const uint32_t payload = n - 9;
    BOOST_REQUIRE(w.write(message_type::stdout_data, 0, std::string(payload, 'f')) ==
                  ring_status::ok);
    BOOST_REQUIRE(r.read().status == ring_status::ok);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(rings)

BOOST_AUTO_TEST_CASE(empty_ring_reads_empty) {
  auto seg = make_segment(4096);
  ring_reader r{seg, direction::to_worker};
  ring_writer w{seg, direction::to_worker};
  auto res = r.read();
  BOOST_TEST((res.status == ring_status::empty));
  BOOST_TEST(res.error.empty());
  BOOST_TEST(r.used_bytes() == 0u);
  BOOST_TEST(w.used_bytes() == 0u);
  BOOST_TEST(w.free_bytes() == 4096u);
  BOOST_TEST(w.max_payload() == 4087u);
}

BOOST_AUTO_TEST_CASE(one_frame_round_trip_and_indices) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_supervisor};
  ring_reader r{seg, direction::to_supervisor};
  BOOST_TEST((w.write(message_type::stdout_data, 7, "hello") == ring_status::ok));
  BOOST_TEST(word(seg.tail_word(direction::to_supervisor)) == 14u);
  BOOST_TEST(word(seg.head_word(direction::to_supervisor)) == 0u);
  // The other direction is untouched.
  BOOST_TEST(word(seg.tail_word(direction::to_worker)) == 0u);
  BOOST_TEST(w.used_bytes() == 14u);
  BOOST_TEST(r.used_bytes() == 14u);
  const auto* data = reinterpret_cast<const char*>(seg.data(direction::to_supervisor));
  BOOST_TEST(std::string(data, 14) == std::string("\x0a\x00\x00\x00\x00\x07\x00\x00\x00hello", 14));
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST((res.value.type == message_type::stdout_data));
  BOOST_TEST(res.value.request_id == 7u);
  BOOST_TEST(res.value.payload == "hello");
  BOOST_TEST(word(seg.head_word(direction::to_supervisor)) == 14u);
  BOOST_TEST((r.read().status == ring_status::empty));
  BOOST_TEST(w.free_bytes() == 4096u);
}

BOOST_AUTO_TEST_CASE(frames_keep_their_order) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  for (uint32_t i = 0; i < 10; ++i)
    BOOST_REQUIRE((w.write(message_type::code, i, std::to_string(i)) == ring_status::ok));
  for (uint32_t i = 0; i < 10; ++i) {
    auto res = r.read();
    BOOST_REQUIRE((res.status == ring_status::ok));
    BOOST_TEST(res.value.request_id == i);
    BOOST_TEST(res.value.payload == std::to_string(i));
  }
  BOOST_TEST((r.read().status == ring_status::empty));
}

BOOST_AUTO_TEST_CASE(full_ring_refuses_then_accepts) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  int written = 0;
  while (w.write(message_type::stdout_data, 0, std::string(100, 'x')) == ring_status::ok)
    ++written;
  BOOST_TEST(written == 37); // 37 * 109 = 4033 bytes
  BOOST_TEST(w.used_bytes() == 4033u);
  BOOST_TEST(w.free_bytes() == 63u);
  // A frame of exactly the free space still fits; then nothing does.
  BOOST_TEST((w.write(message_type::stdout_data, 0, std::string(54, 'y')) == ring_status::ok));
  BOOST_TEST(w.free_bytes() == 0u);
  BOOST_TEST((w.write(message_type::stdout_data, 0, "") == ring_status::full));
  const uint32_t tail_before = word(seg.tail_word(direction::to_worker));
  BOOST_TEST(tail_before == 4096u);
  BOOST_REQUIRE((r.read().status == ring_status::ok));
  BOOST_TEST(w.free_bytes() == 109u);
  BOOST_TEST((w.write(message_type::stdout_data, 1, std::string(100, 'z')) == ring_status::ok));
  BOOST_TEST((w.write(message_type::stdout_data, 1, "") == ring_status::full));
}

BOOST_AUTO_TEST_CASE(header_straddles_the_end) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  // 4090 = 4 frames of 1000 bytes + one of 90: the next header starts 6 bytes
  // before the end of the data area and wraps after its type byte + 1.
  advance_to(seg, direction::to_worker, w, r, 4090);
  BOOST_REQUIRE(word(seg.tail_word(direction::to_worker)) == 4090u);
  const std::string payload = pattern(200, 'a');
  BOOST_REQUIRE((w.write(message_type::code, 0xA1B2C3D4, payload) == ring_status::ok));
  BOOST_TEST(word(seg.tail_word(direction::to_worker)) == 4090u + 209u);
  const auto* data = reinterpret_cast<const unsigned char*>(seg.data(direction::to_worker));
  // len = 205 at 4090..4093, type at 4094, request id bytes at 4095, 0, 1, 2.
  BOOST_TEST(data[4090] == 205);
  BOOST_TEST(data[4093] == 0);
  BOOST_TEST(data[4094] == 0x20);
  BOOST_TEST(data[4095] == 0xD4);
  BOOST_TEST(data[0] == 0xC3);
  BOOST_TEST(data[2] == 0xA1);
  BOOST_TEST(std::memcmp(data + 3, payload.data(), payload.size()) == 0);
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST(res.value.request_id == 0xA1B2C3D4u);
  BOOST_TEST(res.value.payload == payload);
}

BOOST_AUTO_TEST_CASE(payload_straddles_the_end) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_supervisor};
  ring_reader r{seg, direction::to_supervisor};
  advance_to(seg, direction::to_supervisor, w, r, 4000);
  const std::string payload = pattern(3000, 'A'); // 87 bytes before the end, 2913 after
  BOOST_REQUIRE((w.write(message_type::stderr_data, 5, payload) == ring_status::ok));
  const auto* data = reinterpret_cast<const char*>(seg.data(direction::to_supervisor));
  BOOST_TEST(std::memcmp(data + 4009, payload.data(), 87) == 0);
  BOOST_TEST(std::memcmp(data, payload.data() + 87, 2913) == 0);
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST((res.value.type == message_type::stderr_data));
  BOOST_TEST(res.value.payload == payload);
}

BOOST_AUTO_TEST_CASE(length_field_straddles_the_end) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  advance_to(seg, direction::to_worker, w, r, 4094); // len: 2 bytes at the end, 2 at the start
  const std::string payload = pattern(300, '0');
  BOOST_REQUIRE((w.write(message_type::code, 9, payload) == ring_status::ok));
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST(res.value.payload == payload);
}

BOOST_AUTO_TEST_CASE(indices_wrap_at_2_pow_32) {
  auto seg = make_segment(4096);
  const uint32_t start = 0xFFFFFF00u;
  *seg.head_word(direction::to_worker) = start;
  *seg.tail_word(direction::to_worker) = start;
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  for (uint32_t i = 0; i < 50; ++i) {
    const std::string payload = pattern(i * 13, static_cast<char>('a' + i % 20));
    BOOST_REQUIRE((w.write(message_type::code, i, payload) == ring_status::ok));
    auto res = r.read();
    BOOST_REQUIRE((res.status == ring_status::ok));
    BOOST_TEST(res.value.request_id == i);
    BOOST_TEST(res.value.payload == payload);
  }
  // 50 frames of 9 + 13*i bytes: 450 + 13*1225 = 16375 bytes past `start`.
  BOOST_TEST(word(seg.tail_word(direction::to_worker)) == start + 16375u);
  BOOST_TEST(word(seg.tail_word(direction::to_worker)) == 16119u);
  BOOST_TEST(word(seg.head_word(direction::to_worker)) == 16119u);
}

BOOST_AUTO_TEST_CASE(max_size_frame_fits_exactly) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  advance_to(seg, direction::to_worker, w, r, 1234); // and wraps, too
  const std::string payload = pattern(w.max_payload(), 'm');
  BOOST_REQUIRE((w.write(message_type::code, 3, payload) == ring_status::ok));
  BOOST_TEST(w.free_bytes() == 0u);
  BOOST_TEST(w.used_bytes() == 4096u);
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST(res.value.payload.size() == 4087u);
  BOOST_TEST(res.value.payload == payload);
}

BOOST_AUTO_TEST_CASE(oversize_frame_is_refused_and_publishes_nothing) {
  auto seg = make_segment(4096);
  ring_writer w{seg, direction::to_worker};
  ring_reader r{seg, direction::to_worker};
  const std::string payload(w.max_payload() + 1, 'o');
  BOOST_TEST((w.write(message_type::code, 3, payload) == ring_status::corrupt));
  BOOST_TEST((w.write(message_type::code, 3, std::string(1 << 20, 'o')) == ring_status::corrupt));
  BOOST_TEST(word(seg.tail_word(direction::to_worker)) == 0u);
  BOOST_TEST((r.read().status == ring_status::empty));
  // The writer still works afterwards.
  BOOST_TEST((w.write(message_type::code, 4, "ok") == ring_status::ok));
  BOOST_TEST(r.read().value.payload == "ok");
}

BOOST_AUTO_TEST_CASE(ends_attach_to_existing_indices) {
  auto seg = make_segment(4096);
  {
    ring_writer w{seg, direction::to_supervisor};
    BOOST_REQUIRE((w.write(message_type::ready, 0, "{}") == ring_status::ok));
  }
  // A new writer continues at the published tail, a new reader at the head.
  ring_writer w{seg, direction::to_supervisor};
  BOOST_REQUIRE((w.write(message_type::result, 1, "{\"exit_code\":0}") == ring_status::ok));
  ring_reader r{seg, direction::to_supervisor};
  BOOST_TEST(r.read().value.payload == "{}");
  BOOST_TEST(r.read().value.payload == "{\"exit_code\":0}");
  BOOST_TEST((r.read().status == ring_status::empty));
}

BOOST_AUTO_TEST_SUITE_END()
