/// @file frame_test.cpp
/// The frame codec, byte for byte, and its refusals.

#include <boost/test/unit_test.hpp>

#include <string>

#include "ipc/frame.hpp"

using namespace castellan::ipc;
using namespace std::string_literals;

BOOST_AUTO_TEST_SUITE(frames)

BOOST_AUTO_TEST_CASE(le32_round_trip_is_little_endian) {
  unsigned char b[5] = {0, 0, 0, 0, 0xEE};
  store_le32(b, 0x11223344);
  BOOST_TEST(b[0] == 0x44);
  BOOST_TEST(b[1] == 0x33);
  BOOST_TEST(b[2] == 0x22);
  BOOST_TEST(b[3] == 0x11);
  BOOST_TEST(b[4] == 0xEE);
  BOOST_TEST(load_le32(b) == 0x11223344u);
  // Unaligned.
  store_le32(b + 1, 0xDEADBEEF);
  BOOST_TEST(load_le32(b + 1) == 0xDEADBEEFu);
}

BOOST_AUTO_TEST_CASE(encode_is_exact) {
  std::string out = "prefix";
  encode_frame(castellan::ipc::message_type::stderr_data, 0x01020304, "ab", out);
  BOOST_TEST(out == "prefix"s + "\x07\x00\x00\x00"s + "\x06"s + "\x04\x03\x02\x01"s + "ab"s);
}

BOOST_AUTO_TEST_CASE(decode_round_trip) {
  std::string bytes;
  encode_frame(castellan::ipc::message_type::code, 42, "print(6*7)", bytes);
  auto f = decode_frame(bytes);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST(static_cast<int>(f->type) == 0x20);
  BOOST_TEST(f->request_id == 42u);
  BOOST_TEST(f->payload == "print(6*7)");
}

BOOST_AUTO_TEST_CASE(decode_empty_payload) {
  std::string bytes;
  encode_frame(castellan::ipc::message_type::shutdown, 0, "", bytes);
  BOOST_TEST(bytes.size() == 9u);
  auto f = decode_frame(bytes);
  BOOST_REQUIRE(f.has_value());
  BOOST_TEST(f->payload.empty());
}

BOOST_AUTO_TEST_CASE(decode_refuses_short_buffer) {
  auto f = decode_frame("\x05\x00\x00\x00\x00\x00\x00\x00"s); // 8 bytes
  BOOST_REQUIRE(!f.has_value());
  BOOST_TEST(f.error().message == "frame of 8 bytes is shorter than its 9-byte header");
}

BOOST_AUTO_TEST_CASE(decode_refuses_len_below_5) {
  auto f = decode_frame("\x04\x00\x00\x00\x00\x00\x00\x00\x00"s);
  BOOST_REQUIRE(!f.has_value());
  BOOST_TEST(f.error().message == "frame len 4 is below the minimum of 5");
}

BOOST_AUTO_TEST_CASE(decode_refuses_len_mismatch) {
  auto longer = decode_frame("\x06\x00\x00\x00\x00\x00\x00\x00\x00"s);
  BOOST_REQUIRE(!longer.has_value());
  BOOST_TEST(longer.error().message == "frame len 6 disagrees with the 9 bytes of the frame");
  auto shorter = decode_frame("\x05\x00\x00\x00\x00\x00\x00\x00\x00X"s);
  BOOST_REQUIRE(!shorter.has_value());
  BOOST_TEST(shorter.error().message == "frame len 5 disagrees with the 10 bytes of the frame");
  // len = 2^32 - 1 must not wrap `4 + len` to 3.
  auto huge = decode_frame("\xff\xff\xff\xff\x00\x00\x00\x00\x00"s);
  BOOST_REQUIRE(!huge.has_value());
  BOOST_TEST(huge.error().message ==
             "frame len 4294967295 disagrees with the 9 bytes of the frame");
}

BOOST_AUTO_TEST_CASE(decode_refuses_unknown_type) {
  for (int t : {0x0C, 0x0F, 0x13, 0x1F, 0x25, 0xFF}) {
    std::string bytes = "\x05\x00\x00\x00"s;
    bytes.push_back(static_cast<char>(t));
    bytes += "\x00\x00\x00\x00"s;
    auto f = decode_frame(bytes);
    BOOST_REQUIRE(!f.has_value());
    BOOST_TEST(f.error().message == "frame type " + std::to_string(t) + " is unknown");
  }
}

BOOST_AUTO_TEST_SUITE_END()
