#define BOOST_TEST_MODULE castellan platform
#include "support/test_main.hpp"
