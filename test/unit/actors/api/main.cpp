#define BOOST_TEST_MODULE castellan api
#include "support/test_main.hpp"
