/// @file captured_binds_test.cpp
/// A policy's own bind is captured without following symlinks: code that
/// could write a bound host directory under one policy must not be able to
/// plant a symlink there that a later sandbox (another policy binding the
/// link's path) would bind in its place — the host's `/`, say.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;

BOOST_AUTO_TEST_SUITE(captured_binds)

BOOST_AUTO_TEST_CASE(a_symlink_planted_in_a_writable_bind_is_never_bound) {
  char pattern[] = "/var/tmp/castellan-planted-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::string dir = pattern;
  BOOST_REQUIRE(::chmod(dir.c_str(), 0777) == 0); // the worker (host nobody) may write it
  const std::string writer = dir + "/writer.json";
  const std::string reader = dir + "/reader.json";
  std::ofstream(writer) << R"({"version": 1, "extends": ["default"], "fs": {"rules": [
    {"action": "allow", "path": ")" << dir << R"(", "perms": ["read_file", "read_dir",
     "write_file", "make_sym", "make_reg", "remove_file"]}]}})";
  std::ofstream(reader) << R"({"version": 1, "extends": ["default"], "fs": {"rules": [
    {"action": "allow", "path": ")" << dir << R"(/cache", "perms": ["read_file", "read_dir"]}]}})";

  // Under the first policy the code plants cache -> / in the bound directory.
  auto plant = run_process({castellan_cli(), "exec", "--policy", writer,
                            "import os; os.symlink('/', '" + dir + "/cache'); print('planted')"});
  BOOST_REQUIRE_MESSAGE(plant.exit_code == 0, plant.err);
  struct stat st;
  BOOST_REQUIRE(::lstat((dir + "/cache").c_str(), &st) == 0 && S_ISLNK(st.st_mode));

  // The second policy binds that path: its worker must not start with the
  // host's root in its sandbox.
  auto read = run_process({castellan_cli(), "exec", "--json", "--policy", reader,
                           "import os; print(sorted(os.listdir('" + dir + "/cache')))"});
  BOOST_TEST(read.out.find("'proc'") == std::string::npos, read.out);
  BOOST_TEST(read.out.find("worker_lost") != std::string::npos, read.out);
  BOOST_TEST(read.out.find("symlink") != std::string::npos, read.out);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

BOOST_AUTO_TEST_SUITE_END()
