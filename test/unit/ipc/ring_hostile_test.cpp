/// @file ring_hostile_test.cpp
/// The other side writes impossible indices and frames: every one is
/// reported as corrupt with the bad value, and nothing is consumed.

#include <boost/test/unit_test.hpp>

#include <cstring>
#include <string>

#include "ipc/ring.hpp"

using namespace castellan::ipc;
using castellan::ipc::message_type;

namespace {

struct fixture {
  fixture() {
    auto s = segment::create(4096);
    BOOST_REQUIRE(s.has_value());
    seg = std::move(*s);
  }

  /// Writes raw bytes at data offset `at` of the to_supervisor ring.
  void poke(std::size_t at, const std::string& bytes) {
    std::memcpy(seg->data(direction::to_supervisor) + at, bytes.data(), bytes.size());
  }
  void set_tail(uint32_t v) {
    __atomic_store_n(seg->tail_word(direction::to_supervisor), v, __ATOMIC_RELEASE);
  }
  void set_head(uint32_t v) {
    __atomic_store_n(seg->head_word(direction::to_supervisor), v, __ATOMIC_RELEASE);
  }
  uint32_t head() const {
    return __atomic_load_n(seg->head_word(direction::to_supervisor), __ATOMIC_ACQUIRE);
  }

  /// Reads once, expects `corrupt` with exactly `message`, and that the head
  /// did not move (a corrupt ring is not consumed).
  void expect_corrupt(const std::string& message) {
    const uint32_t before = head();
    ring_reader r{*seg, direction::to_supervisor};
    auto res = r.read();
    BOOST_TEST((res.status == ring_status::corrupt));
    BOOST_TEST(res.error == message);
    BOOST_TEST(head() == before);
    // And stays corrupt: a second read says the same.
    auto again = r.read();
    BOOST_TEST((again.status == ring_status::corrupt));
  }

  std::optional<segment> seg;
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(ring_hostile, fixture)

BOOST_AUTO_TEST_CASE(tail_minus_head_above_capacity) {
  set_tail(4097);
  expect_corrupt("ring holds 4097 bytes (tail 4097 - head 0) but its capacity is 4096");
  // Tail behind head: the difference wraps to a huge value.
  set_head(100);
  set_tail(99);
  expect_corrupt("ring holds 4294967295 bytes (tail 99 - head 100) but its capacity is 4096");
}

BOOST_AUTO_TEST_CASE(partial_header_published) {
  poke(0, std::string("\x05\x00\x00\x00\x00", 5));
  set_tail(5);
  expect_corrupt("ring holds 5 bytes, less than a frame header");
}

BOOST_AUTO_TEST_CASE(len_below_5) {
  for (uint32_t len : {0u, 1u, 4u}) {
    std::string bytes(9, '\0');
    store_le32(bytes.data(), len);
    poke(0, bytes);
    set_tail(9);
    expect_corrupt("frame len " + std::to_string(len) + " is below the minimum of 5");
  }
}

BOOST_AUTO_TEST_CASE(len_above_capacity) {
  std::string bytes(9, '\0');
  for (uint32_t len : {4093u, 0xFFFFFFFFu, 0xFFFFFFFCu}) {
    store_le32(bytes.data(), len);
    poke(0, bytes);
    set_tail(4096);
    expect_corrupt("frame len " + std::to_string(len) + " exceeds the ring capacity 4096");
  }
  // 4 + 4092 == capacity is the largest legal frame; with all bytes
  // published it is read.
  store_le32(bytes.data(), 4092);
  poke(0, bytes);
  ring_reader r{*seg, direction::to_supervisor};
  auto res = r.read();
  BOOST_TEST((res.status == ring_status::ok));
  BOOST_TEST(res.value.payload.size() == 4087u);
}

BOOST_AUTO_TEST_CASE(len_above_published_bytes) {
  std::string bytes(9, '\0');
  store_le32(bytes.data(), 100);
  poke(0, bytes);
  set_tail(20);
  expect_corrupt("frame len 100 exceeds the 20 bytes published");
}

BOOST_AUTO_TEST_CASE(unknown_type) {
  std::string bytes("\x05\x00\x00\x00\x0c\x01\x00\x00\x00", 9);
  poke(0, bytes);
  set_tail(9);
  expect_corrupt("frame type 12 is unknown");
}

BOOST_AUTO_TEST_CASE(corrupt_frame_after_good_ones) {
  ring_writer w{*seg, direction::to_supervisor};
  BOOST_REQUIRE((w.write(message_type::stdout_data, 1, "good") == ring_status::ok));
  // Second frame: garbage length right after the good one (13 bytes).
  std::string bytes(9, '\0');
  store_le32(bytes.data(), 3);
  poke(13, bytes);
  set_tail(13 + 9);
  ring_reader r{*seg, direction::to_supervisor};
  auto first = r.read();
  BOOST_REQUIRE((first.status == ring_status::ok));
  BOOST_TEST(first.value.payload == "good");
  BOOST_TEST(head() == 13u);
  auto second = r.read();
  BOOST_TEST((second.status == ring_status::corrupt));
  BOOST_TEST(second.error == "frame len 3 is below the minimum of 5");
  BOOST_TEST(head() == 13u);
}

BOOST_AUTO_TEST_CASE(reader_ignores_a_rewritten_head) {
  // The reader's own head is authoritative: the producer scribbling over
  // the head word does not make the reader re-read or skip frames.
  ring_writer w{*seg, direction::to_supervisor};
  ring_reader r{*seg, direction::to_supervisor};
  BOOST_REQUIRE((w.write(message_type::stdout_data, 1, "a") == ring_status::ok));
  BOOST_REQUIRE((w.write(message_type::stdout_data, 2, "b") == ring_status::ok));
  BOOST_REQUIRE(r.read().value.request_id == 1u);
  set_head(0xDEAD);
  auto res = r.read();
  BOOST_REQUIRE((res.status == ring_status::ok));
  BOOST_TEST(res.value.request_id == 2u);
  BOOST_TEST(head() == 20u);
}

BOOST_AUTO_TEST_CASE(writer_refuses_impossible_consumer_head) {
  // to_worker: the worker is the consumer and writes `head`.
  ring_writer w{*seg, direction::to_worker};
  BOOST_REQUIRE((w.write(message_type::code, 1, "x") == ring_status::ok)); // tail = 10
  uint32_t* head = seg->head_word(direction::to_worker);
  for (uint32_t bad : {11u, 10u - 4097u, 10u + 0x80000000u}) {
    __atomic_store_n(head, bad, __ATOMIC_RELEASE);
    BOOST_TEST((w.write(message_type::code, 2, "y") == ring_status::corrupt));
    BOOST_TEST(w.free_bytes() == 0u);
    BOOST_TEST(w.used_bytes() == 4096u);
    BOOST_TEST(__atomic_load_n(seg->tail_word(direction::to_worker), __ATOMIC_ACQUIRE) == 10u);
  }
  // A head that claims the ring is emptier than possible is still within
  // bounds (tail - head <= capacity) and therefore accepted.
  __atomic_store_n(head, 10u - 4096u, __ATOMIC_RELEASE);
  BOOST_TEST(w.free_bytes() == 0u);
  BOOST_TEST((w.write(message_type::code, 3, "z") == ring_status::full));
  __atomic_store_n(head, 10u, __ATOMIC_RELEASE);
  BOOST_TEST((w.write(message_type::code, 3, "z") == ring_status::ok));
}

BOOST_AUTO_TEST_SUITE_END()
