// `castellan config check`: the real binary on the default config and on a
// bad one: output and exit codes.

#include <boost/test/unit_test.hpp>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;

namespace {

struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/castellan-cli-config-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~temp_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(cli_config)

BOOST_AUTO_TEST_CASE(the_default_config_checks_ok) {
  const std::string file = castellan::test::source_dir() + "/config/castellan.toml";
  auto r = run_process({castellan_cli(), "config", "check", file});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == file + ": ok\npool default: policy default, size 4, mode isolated\n");
  BOOST_TEST(r.err == "");
  // The copy an install uses (share/castellan/castellan.toml) is the same file.
  const std::string installed = castellan::test::build_dir() + "/share/castellan/castellan.toml";
  auto i = run_process({castellan_cli(), "config", "check", installed});
  BOOST_TEST(i.exit_code == 0, i.err);
}

BOOST_AUTO_TEST_CASE(a_bad_config_lists_every_error_and_exits_1) {
  temp_dir d;
  const std::string file = d.path + "/bad.toml";
  std::ofstream(file) << "drain_grace_ms = \"10s\"\n"
                         "[[pools]]\n"
                         "name = \"a\"\n"
                         "sise = 2\n"
                         "[[pools]]\n"
                         "name = \"a\"\n"
                         "limits.memory = \"1GB\"\n";
  auto r = run_process({castellan_cli(), "config", "check", file});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out == "");
  BOOST_TEST(
      r.err ==
      file + ":1:18: drain_grace_ms: \"10s\": must be an integer, not a string\n" + file +
          ":4:1: pools[0].sise: 2: unknown key (did you mean \"size\"?)\n" + file +
          ":6:8: pools[1].name: \"a\": pool name already used by pools[0] (line 3)\n" + file +
          ":7:17: pools[1].limits.memory: \"1GB\": unknown unit \"GB\" (use B, KiB, MiB, GiB or "
          "TiB, with no space: e.g. \"256MiB\")\n" +
          file + ": 4 errors\n");
}

BOOST_AUTO_TEST_CASE(warnings_do_not_fail_the_check) {
  temp_dir d;
  const std::string file = d.path + "/c.toml";
  std::ofstream(file) << "[[pools]]\nname = \"small\"\npolicy = \"strict\"\nsize = 2\n"
                         "mode = \"shared\"\nlimits.pids = 8\n";
  auto r = run_process({castellan_cli(), "config", "check", file});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out ==
             file + ": ok, 1 warning\n" + file +
                 ":6:15: pools[0].limits.pids: warning: policy \"strict\" sets limits.pids = "
                 "16, which the pool uses instead\n"
                 "pool small: policy strict, size 2, mode shared\n");
}

BOOST_AUTO_TEST_CASE(a_missing_file_exits_1_and_no_file_is_a_usage_error) {
  auto r = run_process({castellan_cli(), "config", "check", "/nonexistent/castellan.toml"});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.err == "/nonexistent/castellan.toml: cannot read: No such file or directory\n"
                      "/nonexistent/castellan.toml: 1 error\n");
  auto usage = run_process({castellan_cli(), "config", "check"});
  BOOST_TEST(usage.exit_code == 2);
}

BOOST_AUTO_TEST_SUITE_END()
