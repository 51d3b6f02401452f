// The sandbox profile: what the pool says about a command whose program
// the harness could not start or that ended 126 under exec rules, and the
// masks the sandbox spec keeps.

#include <boost/test/unit_test.hpp>

#include <errno.h>
#include <unistd.h>

#include <algorithm>

#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/package_etc.hpp"

using namespace castellan;

namespace {

sandbox_profile restricted() {
  sandbox_profile p;
  p.landlock = true;
  p.restrict_execute = true;
  p.exec_allowed = {"/usr/bin/python3", "/usr/bin/python3.*", "/bin/sh"};
  return p;
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_profile_tests)

BOOST_AUTO_TEST_CASE(the_harness_refused_exec_names_the_rule_and_what_is_allowed) {
  const auto d = explain_exec_error({"/usr/bin/id"}, {"/usr/bin/id", EACCES}, restricted());
  BOOST_TEST(d.find("exec of /usr/bin/id refused: policy exec default deny (/defaults/exec)") ==
               0u,
             d);
  BOOST_TEST(d.find("allowed: /usr/bin/python3, /usr/bin/python3.*, /bin/sh") != std::string::npos,
             d);
  // A bare name is looked up the way the harness's exec does.
  if (::access("/usr/bin/id", F_OK) == 0) {
    const auto bare = explain_exec_error({"id"}, {"id", EACCES}, restricted());
    BOOST_TEST(bare.find("exec of /usr/bin/id refused") != std::string::npos, bare);
  }
}

BOOST_AUTO_TEST_CASE(a_host_program_the_sandbox_lacks_is_explained) {
  // /bin/sh is on every host this builds on; below the default root, so
  // the explanation says why a rule there would not help.
  const auto d = explain_exec_error({"/bin/sh"}, {"/bin/sh", ENOENT}, sandbox_profile{});
  BOOST_TEST(d.find("/bin/sh is on this host but not inside the sandbox") == 0u, d);
  BOOST_TEST(d.find("default root") != std::string::npos, d);
  // Nowhere on the host, or not a path: nothing to say.
  BOOST_TEST(explain_exec_error({"/nonexistent/x"}, {"/nonexistent/x", ENOENT}, {}).empty());
  BOOST_TEST(explain_exec_error({"sh"}, {"sh", ENOENT}, {}).empty());
}

BOOST_AUTO_TEST_CASE(the_pool_looks_up_only_the_requests_own_program) {
  // A worker that names another program than the request's (a host path it
  // would like probed): nothing is said, nothing is looked up.
  BOOST_TEST(explain_exec_error({"/nonexistent/x"}, {"/bin/sh", ENOENT}, {}).empty());
  BOOST_TEST(explain_exec_error({"/usr/bin/id"}, {"/usr/bin/env", EACCES}, restricted()).empty());
  BOOST_TEST(explain_exec_error({}, {"/bin/sh", ENOENT}, {}).empty());
}

BOOST_AUTO_TEST_CASE(a_program_the_command_started_is_not_named) {
  const auto d = explain_nested_refused_exec({"/bin/sh", "-c", "id"}, 126,
                                             "/bin/sh: 1: id: Permission denied\n", restricted());
  BOOST_TEST(d.find("exit 126 after a \"Permission denied\"") == 0u, d);
  BOOST_TEST(d.find("policy exec default deny (/defaults/exec)") != std::string::npos, d);
  BOOST_TEST(d.find("names no file") != std::string::npos, d);
  // The harness's own line, written by the program: still only the hint.
  const auto same = explain_nested_refused_exec(
    {"/bin/sh", "-c", "x"}, 126, "castellan: /usr/bin/id: Permission denied\n", restricted());
  BOOST_TEST(same.find("exit 126 after") == 0u, same);
}

BOOST_AUTO_TEST_CASE(nothing_is_said_where_the_rules_cannot_be_the_cause) {
  // No exec restriction, another errno, an allowed program; for a started
  // command: another exit code, no "Permission denied" at all.
  sandbox_profile open = restricted();
  open.restrict_execute = false;
  BOOST_TEST(explain_exec_error({"/usr/bin/id"}, {"/usr/bin/id", EACCES}, open).empty());
  BOOST_TEST(explain_exec_error({"/usr/bin/id"}, {"/usr/bin/id", ENOEXEC}, restricted()).empty());
  BOOST_TEST(explain_exec_error({"/bin/sh"}, {"/bin/sh", EACCES}, restricted()).empty());
  const std::string line = "/bin/sh: 1: id: Permission denied\n";
  BOOST_TEST(explain_nested_refused_exec({"/bin/sh"}, 126, line, open).empty());
  BOOST_TEST(explain_nested_refused_exec({"/bin/sh"}, 1, line, restricted()).empty());
  BOOST_TEST(
    explain_nested_refused_exec({"/bin/sh", "-c", "exit 126"}, 126, "", restricted()).empty());
  BOOST_TEST(explain_nested_refused_exec({}, 126, line, restricted()).empty());
}

BOOST_AUTO_TEST_CASE(a_policys_masks_add_to_the_default_roots_own) {
  // The default root masks what it must not show inside the /etc it binds
  // (package_etc.hpp); a policy's fs deny rules add masks, never replace them.
  const auto& etc = platform::package_etc_view();
  sandbox_profile p;
  p.masked_paths = {"/usr/share/doc"};
  auto spec = make_sandbox_spec(p, "/opt/castellan/python/castellan_harness.py");
  BOOST_REQUIRE(spec);
  auto has = [&](const std::string& m) {
    return std::find(spec->root.masked.begin(), spec->root.masked.end(), m) !=
           spec->root.masked.end();
  };
  BOOST_TEST(has("/usr/share/doc"));
  for (const auto& m : etc.masked)
    BOOST_TEST(has("/etc/" + m), m);
}

BOOST_AUTO_TEST_SUITE_END()
