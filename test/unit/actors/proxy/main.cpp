#define BOOST_TEST_MODULE castellan proxy
#include "support/test_main.hpp"
