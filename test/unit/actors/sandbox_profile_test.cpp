// The sandbox profile: the masks the sandbox spec keeps.

#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/package_etc.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(sandbox_profile_tests)

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
