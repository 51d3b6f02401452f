#define BOOST_TEST_MODULE castellan telemetry
#include "support/test_main.hpp"
