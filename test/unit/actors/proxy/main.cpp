#define BOOST_TEST_MODULE castellan proxy
#include <boost/test/unit_test.hpp>
