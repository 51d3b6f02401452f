/// @file message_type_test.cpp
/// The type catalog: exactly the documented values, and nothing else.

#include <boost/test/unit_test.hpp>

#include "ipc/message_type.hpp"

using namespace castellan::ipc;

BOOST_AUTO_TEST_SUITE(message_types)

BOOST_AUTO_TEST_CASE(exactly_the_documented_values_are_valid) {
  const uint8_t documented[] = {0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08,
                                0x09, 0x0A, 0x0B, 0x10, 0x11, 0x12, 0x20, 0x21, 0x22, 0x23, 0x24};
  int valid = 0;
  for (int raw = 0; raw < 256; ++raw) {
    const auto type = to_message_type(static_cast<uint8_t>(raw));
    if (type) {
      ++valid;
      BOOST_TEST(static_cast<int>(*type) == raw);
    }
  }
  BOOST_TEST(valid == 20);
  for (uint8_t raw : documented)
    BOOST_TEST(to_message_type(raw).has_value(), "type " << int{raw});
  BOOST_TEST(!to_message_type(0x0C).has_value());
  BOOST_TEST(!to_message_type(0x13).has_value());
  BOOST_TEST(!to_message_type(0x25).has_value());
  BOOST_TEST(!to_message_type(0xFF).has_value());
}

BOOST_AUTO_TEST_CASE(names_are_the_wire_names) {
  BOOST_TEST(to_string(castellan::ipc::message_type::stdout_data) == "STDOUT");
  BOOST_TEST(to_string(castellan::ipc::message_type::stderr_data) == "STDERR");
  BOOST_TEST(to_string(castellan::ipc::message_type::net_connect) == "NET_CONNECT");
  BOOST_TEST(to_string(castellan::ipc::message_type::warn_allow) == "WARN_ALLOW");
  BOOST_TEST(to_string(castellan::ipc::message_type::code) == "CODE");
  BOOST_TEST(to_string(castellan::ipc::message_type::shutdown) == "SHUTDOWN");
  BOOST_TEST(to_string(castellan::ipc::message_type::tighten) == "TIGHTEN");
  BOOST_TEST(to_string(castellan::ipc::message_type::setup) == "SETUP");
}

BOOST_AUTO_TEST_CASE(direction_split) {
  BOOST_TEST(is_worker_to_supervisor(castellan::ipc::message_type::stdout_data));
  BOOST_TEST(is_worker_to_supervisor(castellan::ipc::message_type::result));
  BOOST_TEST(is_worker_to_supervisor(castellan::ipc::message_type::warn));
  BOOST_TEST(!is_worker_to_supervisor(castellan::ipc::message_type::allow));
  BOOST_TEST(!is_worker_to_supervisor(castellan::ipc::message_type::code));
  BOOST_TEST(!is_worker_to_supervisor(castellan::ipc::message_type::shutdown));
  BOOST_TEST(!is_worker_to_supervisor(castellan::ipc::message_type::tighten));
  BOOST_TEST(!is_worker_to_supervisor(castellan::ipc::message_type::setup));
}

BOOST_AUTO_TEST_SUITE_END()
