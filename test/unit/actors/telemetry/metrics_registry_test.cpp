#include <boost/test/unit_test.hpp>

#include "actors/telemetry/metrics_registry.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(telemetry_registry)

BOOST_AUTO_TEST_CASE(names_are_validated) {
  BOOST_TEST(valid_metric_name("castellan_execs_total"));
  BOOST_TEST(valid_metric_name("a:b_c"));
  BOOST_TEST(!valid_metric_name("9lives"));
  BOOST_TEST(!valid_metric_name("with-dash"));
  BOOST_TEST(!valid_metric_name(""));
  BOOST_TEST(valid_label_name("pool"));
  BOOST_TEST(!valid_label_name("__reserved"));
  BOOST_TEST(!valid_label_name("a:b"));
  BOOST_TEST(!valid_label_name("1x"));
}

BOOST_AUTO_TEST_CASE(declarations_follow_the_naming_rules) {
  metrics_registry reg;
  BOOST_TEST(static_cast<bool>(reg.declare("x_total", metric_type::counter, "h")));
  BOOST_TEST(!reg.declare("x", metric_type::counter, "h"));        // counters end in _total
  BOOST_TEST(!reg.declare("y_total", metric_type::gauge, "h"));    // only counters do
  BOOST_TEST(!reg.declare("lat_us", metric_type::histogram, "h")); // base unit: seconds
  BOOST_TEST(static_cast<bool>(reg.declare("lat_seconds", metric_type::histogram, "h")));
  BOOST_TEST(static_cast<bool>(reg.declare("x_total", metric_type::counter, "again")));
  BOOST_TEST(!reg.declare("x_total", metric_type::gauge, "h")); // type clash
  BOOST_TEST(!reg.declare("bad name", metric_type::gauge, "h"));
}

BOOST_AUTO_TEST_CASE(updates_check_type_labels_and_sign) {
  metrics_registry reg;
  reg.declare("c_total", metric_type::counter, "c");
  reg.declare("g", metric_type::gauge, "g");
  reg.declare("h_seconds", metric_type::histogram, "h");
  BOOST_TEST(reg.add("c_total", {{"pool", "a"}}, 2));
  BOOST_TEST(reg.add("c_total", {{"pool", "a"}}, 3));
  BOOST_TEST(*reg.value("c_total", {{"pool", "a"}}) == 5);
  BOOST_TEST(!reg.add("c_total", {{"pool", "a"}}, -1)); // counters only go up
  BOOST_TEST(!reg.add("g", {}, 1));                     // not a counter
  BOOST_TEST(!reg.add("nope_total", {}, 1));            // not declared
  BOOST_TEST(!reg.add("c_total", {{"__x", "a"}}, 1));   // reserved label
  BOOST_TEST(reg.set("g", {}, -4.5));
  BOOST_TEST(*reg.value("g", {}) == -4.5);
  BOOST_TEST(reg.set("c_total", {{"pool", "b"}}, 7)); // a total kept elsewhere
  BOOST_TEST(!reg.set("c_total", {{"pool", "b"}}, -7));
  BOOST_TEST(reg.observe_us("h_seconds", {{"pool", "a"}}, 10));
  BOOST_TEST(!reg.observe_us("h_seconds", {{"le", "1"}}, 10)); // le is the histogram's
  BOOST_TEST(reg.find_histogram("h_seconds", {{"pool", "a"}})->count() == 1u);
  BOOST_TEST(reg.refused() == 6u);
  BOOST_TEST(*reg.value("castellan_telemetry_refused_total", {}) == 6);
}

BOOST_AUTO_TEST_CASE(series_are_capped_per_family) {
  metrics_registry reg(3);
  reg.declare("g", metric_type::gauge, "g");
  for (int i = 0; i < 10; ++i)
    reg.set("g", {{"worker", std::to_string(i)}}, i);
  BOOST_TEST(reg.find("g")->series() == 3u);
  BOOST_TEST(reg.refused() == 7u);
  BOOST_TEST(reg.set("g", {{"worker", "1"}}, 42)); // existing series still update
  BOOST_TEST(reg.remove_if("g", [](const metric_labels& l) { return l.at("worker") == "1"; }) ==
             1u);
  BOOST_TEST(reg.set("g", {{"worker", "9"}}, 9)); // room again
}

BOOST_AUTO_TEST_SUITE_END()
