#include <boost/test/unit_test.hpp>

#include "actors/telemetry/histogram.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(telemetry_histogram)

BOOST_AUTO_TEST_CASE(buckets_are_powers_of_two_microseconds) {
  BOOST_TEST(histogram::bound_us(0) == 1u);
  BOOST_TEST(histogram::bound_us(10) == 1024u);
  BOOST_TEST(histogram::bound_us(histogram::bucket_count - 1) == 67108864u); // ~67 s
}

BOOST_AUTO_TEST_CASE(observations_land_in_the_first_bucket_that_holds_them) {
  histogram h;
  for (uint64_t us : std::initializer_list<uint64_t>{0, 1, 2, 3, 4, 5, 1000, 1024, 1025, 100000000})
    h.observe(us);
  BOOST_TEST(h.count() == 10u);
  BOOST_TEST(h.sum_us() == 0u + 1 + 2 + 3 + 4 + 5 + 1000 + 1024 + 1025 + 100000000);
  BOOST_TEST(h.cumulative(0) == 2u);  // 0, 1
  BOOST_TEST(h.cumulative(1) == 3u);  // + 2
  BOOST_TEST(h.cumulative(2) == 5u);  // + 3, 4
  BOOST_TEST(h.cumulative(3) == 6u);  // + 5
  BOOST_TEST(h.cumulative(10) == 8u); // + 1000, 1024
  BOOST_TEST(h.cumulative(11) == 9u); // + 1025
  BOOST_TEST(h.cumulative(histogram::bucket_count - 1) == 9u);
  BOOST_TEST(h.cumulative(histogram::bucket_count) == 10u); // +Inf
}

BOOST_AUTO_TEST_CASE(quantiles_are_bucket_upper_bounds) {
  histogram h;
  BOOST_TEST(h.quantile_us(0.5) == 0u);
  for (int i = 0; i < 90; ++i)
    h.observe(100); // bucket 128
  for (int i = 0; i < 10; ++i)
    h.observe(5000); // bucket 8192
  BOOST_TEST(h.quantile_us(0.5) == 128u);
  BOOST_TEST(h.quantile_us(0.9) == 128u);
  BOOST_TEST(h.quantile_us(0.91) == 8192u);
  BOOST_TEST(h.quantile_us(1.0) == 8192u);
  histogram big;
  big.observe(500000000); // beyond the last finite bucket
  BOOST_TEST(big.quantile_us(0.99) == 500000000u);
}

BOOST_AUTO_TEST_CASE(merge_adds_everything) {
  histogram a, b;
  a.observe(1);
  b.observe(3);
  b.observe(3000);
  a.merge(b);
  BOOST_TEST(a.count() == 3u);
  BOOST_TEST(a.sum_us() == 3004u);
  BOOST_TEST(a.cumulative(2) == 2u);
}

BOOST_AUTO_TEST_SUITE_END()
