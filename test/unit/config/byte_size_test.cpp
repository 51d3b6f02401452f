// Sizes in the config: bytes or digits with a binary unit, strictly.

#include <boost/test/unit_test.hpp>

#include "config/byte_size.hpp"

using castellan::config::format_byte_size;
using castellan::config::parse_byte_size;

BOOST_AUTO_TEST_SUITE(byte_size)

BOOST_AUTO_TEST_CASE(numbers_and_binary_units) {
  BOOST_TEST(parse_byte_size("0").bytes == 0u);
  BOOST_TEST(parse_byte_size("4096").bytes == 4096u);
  BOOST_TEST(parse_byte_size("17B").bytes == 17u);
  BOOST_TEST(parse_byte_size("64KiB").bytes == 64u * 1024);
  BOOST_TEST(parse_byte_size("256MiB").bytes == 256ull << 20);
  BOOST_TEST(parse_byte_size("3GiB").bytes == 3ull << 30);
  BOOST_TEST(parse_byte_size("2TiB").bytes == 2ull << 40);
  for (const char* ok : {"0", "4096", "17B", "64KiB", "256MiB", "3GiB", "2TiB"})
    BOOST_TEST(parse_byte_size(ok).error.empty(), ok);
}

BOOST_AUTO_TEST_CASE(anything_else_is_refused_with_the_reason) {
  BOOST_TEST(parse_byte_size("256MB").error ==
             "unknown unit \"MB\" (use B, KiB, MiB, GiB or TiB, with no space: e.g. \"256MiB\")");
  BOOST_TEST(parse_byte_size("256 MiB").error ==
             "no space between the number and its unit (e.g. \"256MiB\")");
  BOOST_TEST(parse_byte_size("").error ==
             "not a size: it must start with a number of bytes or of B, KiB, MiB, GiB or TiB "
             "(e.g. \"256MiB\")");
  for (const char* bad : {"MiB", "-1", "1.5GiB", "1e6", "0x10", "256mib", "256M", "256K", "10KiBs",
                          " 256MiB", "256MiB "})
    BOOST_TEST(!parse_byte_size(bad).error.empty(), bad);
}

BOOST_AUTO_TEST_CASE(overflow_is_refused_never_wrapped) {
  BOOST_TEST(parse_byte_size("18446744073709551615").bytes == 18446744073709551615ull);
  BOOST_TEST(parse_byte_size("18446744073709551616").error == "too large");
  BOOST_TEST(parse_byte_size("16777216TiB").error == "too large");
  BOOST_TEST(parse_byte_size("16777215TiB").bytes == 16777215ull << 40);
  BOOST_TEST(parse_byte_size("99999999999999999999999KiB").error == "too large");
}

BOOST_AUTO_TEST_CASE(formatting_is_exact_and_reads_back) {
  BOOST_TEST(format_byte_size(0) == "0");
  BOOST_TEST(format_byte_size(1000) == "1000");
  BOOST_TEST(format_byte_size(1024) == "1KiB");
  BOOST_TEST(format_byte_size(1536 * 1024) == "1536KiB");
  BOOST_TEST(format_byte_size(256ull << 20) == "256MiB");
  BOOST_TEST(format_byte_size(1ull << 40) == "1TiB");
  for (uint64_t v : {1ull, 1023ull, 4096ull, (3ull << 30) + 1024, 5ull << 40})
    BOOST_TEST(parse_byte_size(format_byte_size(v)).bytes == v);
}

BOOST_AUTO_TEST_SUITE_END()
