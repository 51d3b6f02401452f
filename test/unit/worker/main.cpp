/// @file main.cpp
/// The Boost.Test module of test_worker; the suites live in the *_test.cpp files.

#define BOOST_TEST_MODULE castellan_worker
#include "support/test_main.hpp"
