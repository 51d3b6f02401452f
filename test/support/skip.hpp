#pragma once

/// @file skip.hpp
/// Skipping a check is allowed only where the running kernel or machine
/// lacks what it needs, and then it must show: skip() prints why and makes
/// the executable exit 77 (test_main.hpp), so CTest reports the entry as
/// skipped instead of passed.

#include <atomic>
#include <iostream>
#include <string>

namespace castellan::test {

/// The exit code CTest's SKIP_RETURN_CODE maps to "skipped".
inline constexpr int skip_exit_code = 77;

/// How many checks skip() skipped in this run.
inline std::atomic<int>& skipped_checks() {
  static std::atomic<int> count{0};
  return count;
}

/// Records that the calling test case skips (part of) its checks, and why.
inline void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
  ++skipped_checks();
}

} // namespace castellan::test
