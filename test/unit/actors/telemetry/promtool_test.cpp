#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

#include "actors/telemetry/telemetry_core.hpp"
#include "telemetry_test_support.hpp"

using namespace castellan;

namespace {

struct check_result {
  int exit_code = -1;
  std::string output;
};

// Runs `promtool check metrics` on `text` (its lint included: names, units,
// HELP, suffixes), as a scraper's own parser would see it.
check_result promtool_check(const std::string& text) {
  const std::string promtool = CASTELLAN_PROMTOOL;
  BOOST_REQUIRE_MESSAGE(promtool.find("NOTFOUND") == std::string::npos &&
                            ::access(promtool.c_str(), X_OK) == 0,
                        "promtool not found: install Debian's `prometheus` package "
                        "(apt-get install prometheus) and reconfigure");
  char path[] = "/tmp/castellan-metrics-XXXXXX";
  const int fd = ::mkstemp(path);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << text;
  const std::string cmd = "timeout 60 '" + promtool + "' check metrics < " + path + " 2>&1";
  check_result out;
  FILE* p = ::popen(cmd.c_str(), "r");
  BOOST_REQUIRE(p != nullptr);
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0)
    out.output.append(buf, n);
  const int status = ::pclose(p);
  ::unlink(path);
  out.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(telemetry_promtool)

BOOST_AUTO_TEST_CASE(promtool_accepts_the_full_catalogue_without_lint) {
  telemetry_core core;
  test::feed(core, 1000);
  core.apply(counter_increment{metric_names::audit_records, {{"kind", "syscall_denied"}}, 3});
  core.apply(counter_increment{metric_names::audit_dropped, {{"sink", "subscriber"}}, 1});
  core.apply(exec_observation{"we\"ird\\pool\n", error_class::ok, 1, 2}, 1000);
  const auto r = promtool_check(core.exposition());
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(r.output.empty(), r.output);
}

BOOST_AUTO_TEST_CASE(promtool_really_checks) {
  // A control: promtool must refuse a broken text, or the test above proves nothing.
  const auto r = promtool_check("# TYPE x gauge\nx{a=\"unterminated} 1\n");
  BOOST_TEST(r.exit_code != 0, r.output);
}

BOOST_AUTO_TEST_SUITE_END()
