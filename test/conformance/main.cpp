#define BOOST_TEST_MODULE castellan conformance
#include "support/test_main.hpp"
