#pragma once

/// @file run_process.hpp
/// Runs a program to completion with a deadline and captures its stdout and
/// stderr: how the tests drive the real `castellan` binary.

#include <sys/types.h>

#include <functional>
#include <string>
#include <vector>

namespace castellan::test {

struct process_result {
  int exit_code = -1; ///< 128 + signal when a signal ended it
  std::string out;
  std::string err;
  double seconds = 0; ///< wall time
};

/// Runs `argv` (argv[0] an absolute path) with `input` on stdin; kills it
/// and fails the running test if it is still running after `timeout_s`.
/// `while_running`, if given, is called with its pid once stdin is written
/// (e.g. to signal it once it is where the test wants it).
process_result run_process(const std::vector<std::string>& argv, const std::string& input = {},
                           int timeout_s = 60,
                           const std::function<void(pid_t)>& while_running = {});

} // namespace castellan::test
