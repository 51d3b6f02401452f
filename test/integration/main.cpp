#define BOOST_TEST_MODULE castellan integration
#include "support/test_main.hpp"
