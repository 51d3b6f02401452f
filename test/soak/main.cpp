#define BOOST_TEST_MODULE castellan soak
#include <boost/test/unit_test.hpp>
