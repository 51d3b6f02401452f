// The sandbox profile: what the pool says about a command that ended 126
// under exec rules, and the masks the sandbox spec keeps.

#include <boost/test/unit_test.hpp>

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
  const auto d = explain_refused_exec({"/usr/bin/id"}, 126,
                                      "castellan: /usr/bin/id: Permission denied\n", restricted());
  BOOST_TEST(d.find("exec of /usr/bin/id refused: policy exec default deny (/defaults/exec)") ==
               0u,
             d);
  BOOST_TEST(d.find("allowed: /usr/bin/python3, /usr/bin/python3.*, /bin/sh") != std::string::npos,
             d);
  // A bare name is looked up the way the harness's exec does.
  if (::access("/usr/bin/id", F_OK) == 0) {
    const auto bare = explain_refused_exec({"id"}, 126, "castellan: id: Permission denied\n",
                                           restricted());
    BOOST_TEST(bare.find("exec of /usr/bin/id refused") != std::string::npos, bare);
  }
}

BOOST_AUTO_TEST_CASE(a_program_the_command_started_is_not_named) {
  const auto d = explain_refused_exec({"/bin/sh", "-c", "id"}, 126,
                                      "/bin/sh: 1: id: Permission denied\n", restricted());
  BOOST_TEST(d.find("exit 126 after a \"Permission denied\"") == 0u, d);
  BOOST_TEST(d.find("policy exec default deny (/defaults/exec)") != std::string::npos, d);
  BOOST_TEST(d.find("names no file") != std::string::npos, d);
}

BOOST_AUTO_TEST_CASE(nothing_is_said_where_the_rules_cannot_be_the_cause) {
  // No exec restriction, another exit code, an allowed program, no
  // "Permission denied" at all.
  sandbox_profile open = restricted();
  open.restrict_execute = false;
  const std::string line = "castellan: /usr/bin/id: Permission denied\n";
  BOOST_TEST(explain_refused_exec({"/usr/bin/id"}, 126, line, open).empty());
  BOOST_TEST(explain_refused_exec({"/usr/bin/id"}, 1, line, restricted()).empty());
  BOOST_TEST(explain_refused_exec({"/bin/sh"}, 126, "castellan: /bin/sh: Permission denied\n",
                                  restricted())
               .empty());
  BOOST_TEST(explain_refused_exec({"/bin/sh", "-c", "exit 126"}, 126, "", restricted()).empty());
  BOOST_TEST(explain_refused_exec({}, 126, line, restricted()).empty());
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
