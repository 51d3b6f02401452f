#pragma once

/// @file temp_dir.hpp
/// A fresh directory under the temporary directory, removed with everything
/// in it at the end of the test.

#include <cstdlib>
#include <filesystem>
#include <string>

#include <boost/test/unit_test.hpp>

namespace castellan::test {

struct temp_dir {
  std::filesystem::path path;
  temp_dir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "castellan-test-XXXXXX").string();
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;
  std::string file(const std::string& name) const { return (path / name).string(); }
};

} // namespace castellan::test
