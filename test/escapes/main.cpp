#define BOOST_TEST_MODULE castellan escapes
#include <boost/test/unit_test.hpp>
