#pragma once

/// @file harness_exec_error.hpp
/// The harness's own exec of a COMMAND's program failed: the RESULT's
/// `exec_error` field (docs/wire.md). CAF-free.

#include <string>

namespace castellan {

/// What the harness reports when its execve of a COMMAND's program failed,
/// so that the pool can explain the failure without reading stderr (which
/// a program that did start may fill with the same words).
struct harness_exec_error {
  /// The program as the harness executed it: the COMMAND's argv[0] (looked
  /// up on the worker's PATH when it has no slash).
  std::string program;
  /// The execve's errno (ENOENT: not found, EACCES: refused, …); 1..4095.
  int error_number = 0;
};

} // namespace castellan
