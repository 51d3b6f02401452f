#define BOOST_TEST_MODULE castellan python client
#include "support/test_main.hpp"
