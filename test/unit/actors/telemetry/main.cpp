#define BOOST_TEST_MODULE castellan telemetry
#include <boost/test/unit_test.hpp>
