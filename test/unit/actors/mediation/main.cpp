#define BOOST_TEST_MODULE castellan mediation
#include "support/test_main.hpp"
