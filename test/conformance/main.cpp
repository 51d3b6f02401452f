#define BOOST_TEST_MODULE castellan conformance
#include <boost/test/unit_test.hpp>
