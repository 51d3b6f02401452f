#define BOOST_TEST_MODULE castellan soak
#include "support/test_main.hpp"
