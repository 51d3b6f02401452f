#define BOOST_TEST_MODULE castellan actors
#include <boost/test/unit_test.hpp>
