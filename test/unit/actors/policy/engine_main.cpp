#define BOOST_TEST_MODULE castellan_policy_engine
#include "support/test_main.hpp"
