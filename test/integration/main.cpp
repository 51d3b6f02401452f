#define BOOST_TEST_MODULE castellan integration
#include <boost/test/unit_test.hpp>
