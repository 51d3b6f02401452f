#define BOOST_TEST_MODULE castellan audit
#include "support/test_main.hpp"
