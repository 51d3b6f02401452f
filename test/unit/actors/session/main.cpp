#define BOOST_TEST_MODULE castellan session
#include "support/test_main.hpp"
