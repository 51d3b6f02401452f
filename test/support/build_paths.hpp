#pragma once

/// @file build_paths.hpp
/// Where the tests find the binaries of the build tree (CTest sets
/// CASTELLAN_BUILD_DIR and CASTELLAN_SOURCE_DIR for every test).

#include <cstdlib>
#include <string>

namespace castellan::test {

inline std::string build_dir() {
  const char* dir = std::getenv("CASTELLAN_BUILD_DIR");
  return dir ? dir : "build";
}

inline std::string source_dir() {
  const char* dir = std::getenv("CASTELLAN_SOURCE_DIR");
  return dir ? dir : ".";
}

inline std::string worker_binary() {
  return build_dir() + "/bin/castellan-worker";
}

inline std::string harness() {
  return build_dir() + "/share/castellan/python/castellan_harness.py";
}

inline std::string castellan_cli() {
  return build_dir() + "/bin/castellan";
}

} // namespace castellan::test
