/// @file main.cpp
/// The Boost.Test module of test_ipc; the suites live in the *_test.cpp files.

#define BOOST_TEST_MODULE castellan_ipc
#include "support/test_main.hpp"
