#include <boost/test/unit_test.hpp>

#include "actors/telemetry/prometheus_exposition.hpp"
#include "exposition_validator.hpp"

using namespace castellan;

namespace {

std::string errors_of(const test::parsed_exposition& p) {
  std::string out;
  for (const auto& e : p.errors)
    out += e + "\n";
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(telemetry_exposition)

BOOST_AUTO_TEST_CASE(values_and_seconds_print_exactly) {
  BOOST_TEST(format_us_as_seconds(0) == "0");
  BOOST_TEST(format_us_as_seconds(1) == "0.000001");
  BOOST_TEST(format_us_as_seconds(2500) == "0.0025");
  BOOST_TEST(format_us_as_seconds(3000000) == "3");
  BOOST_TEST(format_us_as_seconds(67108864) == "67.108864");
  BOOST_TEST(format_sample_value(42) == "42");
  BOOST_TEST(format_sample_value(-3) == "-3");
  BOOST_TEST(format_sample_value(0.25) == "0.25");
  BOOST_TEST(format_sample_value(1.0 / 0.0) == "+Inf");
  BOOST_TEST(format_sample_value(-1.0 / 0.0) == "-Inf");
  BOOST_TEST(format_sample_value(0.0 / 0.0) == "NaN");
}

BOOST_AUTO_TEST_CASE(label_values_and_help_are_escaped) {
  BOOST_TEST(escape_label_value("a\"b\\c\nd") == "a\\\"b\\\\c\\nd");
  BOOST_TEST(escape_label_value("caf\xc3\xa9") == "caf\xc3\xa9");   // valid UTF-8 kept
  BOOST_TEST(escape_label_value("x\xff") == "x\xef\xbf\xbd");       // invalid replaced
  BOOST_TEST(escape_help("say \"hi\"\\\n") == "say \"hi\"\\\\\\n"); // quotes stay in HELP
}

BOOST_AUTO_TEST_CASE(the_text_is_valid_and_says_what_was_recorded) {
  metrics_registry reg;
  reg.declare("app_requests_total", metric_type::counter, "Requests.\nSecond line \\ too.");
  reg.declare("app_temperature", metric_type::gauge, "Temperature.");
  reg.declare("app_latency_seconds", metric_type::histogram, "Latency.");
  reg.declare("app_unused", metric_type::gauge, "Declared, never set.");
  reg.add("app_requests_total", {{"pool", "a"}, {"code", "ok"}}, 3);
  reg.add("app_requests_total", {{"pool", "we\"ird\\\n"}, {"code", "ok"}}, 1);
  reg.set("app_temperature", {}, 21.5);
  const uint64_t obs[] = {1, 3, 3, 700, 1500, 90000000};
  for (auto us : obs)
    reg.observe_us("app_latency_seconds", {{"pool", "a"}}, us);
  const auto text = to_prometheus_text(reg);
  const auto p = test::parse_exposition(text);
  BOOST_TEST_REQUIRE(p.valid(), errors_of(p) << text);
  BOOST_TEST(p.families.at("app_requests_total").type == "counter");
  BOOST_TEST(p.families.at("app_latency_seconds").type == "histogram");
  BOOST_TEST(*p.value("app_requests_total", {{"pool", "a"}, {"code", "ok"}}) == 3);
  BOOST_TEST(*p.value("app_requests_total", {{"pool", "we\"ird\\\n"}, {"code", "ok"}}) == 1);
  BOOST_TEST(*p.value("app_temperature") == 21.5);
  BOOST_TEST(*p.value("app_latency_seconds_count", {{"pool", "a"}}) == 6);
  BOOST_TEST(*p.value("app_latency_seconds_sum", {{"pool", "a"}}) ==
             (1 + 3 + 3 + 700 + 1500 + 90000000) / 1e6);
  // Each bucket counts the observations ≤ its bound.
  for (size_t i = 0; i < histogram::bucket_count; ++i) {
    const auto bound = histogram::bound_us(i);
    double expected = 0;
    for (auto us : obs)
      expected += us <= bound ? 1 : 0;
    BOOST_TEST(*p.value("app_latency_seconds_bucket",
                        {{"pool", "a"}, {"le", format_us_as_seconds(bound)}}) == expected,
               "le " << bound);
  }
  BOOST_TEST(*p.value("app_latency_seconds_bucket", {{"pool", "a"}, {"le", "+Inf"}}) == 6);
  BOOST_TEST(text.find("# HELP app_requests_total Requests.\\nSecond line \\\\ too.\n") !=
             std::string::npos);
  BOOST_TEST(text.find("# TYPE app_unused gauge\n") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_validator_is_strict) {
  // Each of these must be refused, or the validator proves nothing.
  const char* bad[] = {
      "x 1",                                             // no final newline
      "# TYPE x gauge\nx 1\n\n",                         // empty line
      "x 1\n",                                           // sample without TYPE
      "# TYPE x gauge\nx{a=\"1\"} 1\nx{a=\"1\"} 2\n",    // duplicate series
      "# TYPE x gauge\nx{a=\"\\t\"} 1\n",                // bad escape
      "# TYPE x gauge\nx{a=\"1} 1\n",                    // unterminated value
      "# TYPE x gauge\nx{__a=\"1\"} 1\n",                // reserved label
      "# TYPE x gauge\nx one\n",                         // bad value
      "# TYPE x gauge\n# TYPE x gauge\nx 1\n",           // second TYPE
      "# TYPE x gauge\nx 1\n# TYPE y gauge\ny 1\nx 2\n", // not contiguous
      "# TYPE x_total counter\nx_total -1\n",            // negative counter
      "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 1\nh_seconds_sum 1\n"
      "h_seconds_count 1\n", // no +Inf bucket
      "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"1\"} 2\nh_seconds_bucket{le=\"2\"} 1\n"
      "h_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 1\nh_seconds_count 2\n", // not cumulative
      "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_sum 1\n"
      "h_seconds_count 3\n", // +Inf != count
      "# TYPE h_seconds histogram\nh_seconds_bucket{le=\"+Inf\"} 2\nh_seconds_count 2\n", // no sum
      "# TYPE x gauge\nx\xff 1\n", // not UTF-8 / bad name
  };
  for (const char* text : bad)
    BOOST_TEST(!test::parse_exposition(text).valid(), text);
  BOOST_TEST(
      test::parse_exposition("# HELP x X.\n# TYPE x gauge\nx{a=\"1\",b=\"\\\"\"} 1 123\n").valid());
}

BOOST_AUTO_TEST_SUITE_END()
