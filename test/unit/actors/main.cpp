#define BOOST_TEST_MODULE castellan actors
#include "support/test_main.hpp"
