#define BOOST_TEST_MODULE castellan escapes
#include "support/test_main.hpp"
