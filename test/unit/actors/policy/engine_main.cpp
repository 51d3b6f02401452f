#define BOOST_TEST_MODULE castellan_policy_engine
#include <boost/test/unit_test.hpp>
