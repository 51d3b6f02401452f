#define BOOST_TEST_MODULE castellan audit
#include <boost/test/unit_test.hpp>
