#define BOOST_TEST_MODULE castellan platform
#include <boost/test/unit_test.hpp>
