#define BOOST_TEST_MODULE castellan config
#include "support/test_main.hpp"
