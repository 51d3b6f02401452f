// Which system calls a policy makes the supervisor decide (notify_spec_for,
// actors/mediation/notify_mapping.hpp): the pre-built policies, whose
// decisions the static layers take alone, list none; every carve-out lists
// exactly the calls that can exercise it.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "actors/mediation/notify_mapping.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "support/build_paths.hpp"

using namespace castellan;

namespace {

bool listed(const platform::notify_spec& spec, const std::string& name) {
  return std::count(spec.syscalls.begin(), spec.syscalls.end(), name) == 1;
}

} // namespace

BOOST_AUTO_TEST_SUITE(notify_mapping_tests)

BOOST_AUTO_TEST_CASE(the_notify_set_follows_the_policy) {
  const std::string dir = test::source_dir() + "/policies";
  // The default policy has nothing the static layers cannot decide.
  auto def = policy::load_policy(dir + "/default.json", dir);
  BOOST_REQUIRE(def);
  BOOST_TEST(notify_spec_for(*def).empty());
  // strict.json denies writes on the whole tree and every address: the
  // defaults' and the namespace's job.
  auto strict = policy::load_policy(dir + "/strict.json", dir);
  BOOST_REQUIRE(strict);
  BOOST_TEST(notify_spec_for(*strict).empty());
  auto no_net = policy::load_policy(dir + "/no-network.json", dir);
  BOOST_REQUIRE(no_net);
  BOOST_TEST(notify_spec_for(*no_net).empty());
  auto med = policy::load_policy(test::source_dir() + "/test/integration/data/mediated.json", dir);
  BOOST_REQUIRE(med);
  auto spec = notify_spec_for(*med);
  BOOST_TEST(!spec.open_writes_only); // reads under /tmp/secret are decided
  for (const char* name :
       {"open",      "openat", "creat",  "openat2", "execve",   "execveat",  "unlink",
        "unlinkat",  "rmdir",  "mkdir",  "mkdirat", "mknod",    "mknodat",   "symlink",
        "symlinkat", "link",   "linkat", "rename",  "renameat", "renameat2", "truncate",
        "connect",   "bind",   "sendto", "sendmsg", "sendmmsg", "umask"})
    BOOST_TEST(listed(spec, name), name);

  // Only a write carve-out: opens that write, what may give a written file
  // a new name (rename, link), truncate, and the calls that write to a
  // pathname socket. Nothing that only removes or creates other entries.
  policy::policy_document writes = *def;
  policy::fs_rule carve;
  carve.verdict = policy::action::deny;
  carve.path = "/tmp/denied";
  carve.perms = policy::to_access(policy::fs_perm::write_file);
  writes.fs_rules.push_back(carve);
  spec = notify_spec_for(writes);
  BOOST_TEST(spec.open_writes_only);
  for (const char* name :
       {"open", "openat", "creat", "openat2", "rename", "renameat", "renameat2", "link", "linkat",
        "truncate", "connect", "sendto", "sendmsg", "sendmmsg", "umask"})
    BOOST_TEST(listed(spec, name), name);
  for (const char* name :
       {"unlink", "unlinkat", "rmdir", "mkdir", "mkdirat", "mknod", "symlink", "bind", "execve"})
    BOOST_TEST(!listed(spec, name), name);

  // Only removals: no open is decided.
  carve.perms = policy::to_access(policy::fs_perm::remove_file);
  policy::policy_document removals = *def;
  removals.fs_rules.push_back(carve);
  spec = notify_spec_for(removals);
  BOOST_TEST(listed(spec, "unlink"));
  BOOST_TEST(listed(spec, "unlinkat"));
  BOOST_TEST(listed(spec, "rename"));
  BOOST_TEST(!listed(spec, "openat"));
  BOOST_TEST(!listed(spec, "rmdir"));
  BOOST_TEST(!listed(spec, "connect"));

  // Only a net carve-out: the calls with an address, nothing else.
  policy::policy_document net = *def;
  net.net_rules = med->net_rules;
  spec = notify_spec_for(net);
  BOOST_TEST(spec.syscalls.size() == 5u);
  for (const char* name : {"connect", "bind", "sendto", "sendmsg", "sendmmsg"})
    BOOST_TEST(listed(spec, name), name);
}

BOOST_AUTO_TEST_SUITE_END()
