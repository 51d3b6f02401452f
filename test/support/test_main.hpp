#pragma once

/// @file test_main.hpp
/// The main of every test executable: Boost.Test's, except that a run in
/// which a test case skipped part of its checks (castellan::test::skip) and
/// nothing failed exits 77, which CTest reports as skipped (SKIP_RETURN_CODE
/// in cmake/CastellanTesting.cmake), never as passed. Include it once per
/// executable, after defining BOOST_TEST_MODULE.

#define BOOST_TEST_NO_MAIN
#include <boost/test/unit_test.hpp>

#include "support/skip.hpp"

int main(int argc, char* argv[]) {
  const int rc = boost::unit_test::unit_test_main(&init_unit_test, argc, argv);
  return rc == 0 && castellan::test::skipped_checks() != 0 ? castellan::test::skip_exit_code : rc;
}
