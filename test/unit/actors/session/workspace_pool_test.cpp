#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <fstream>
#include <sstream>
#include <string>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/session/workspace_store.hpp"
#include "support/pool_fixture.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;

namespace {

constexpr uint64_t mib = 1u << 20;

/// Pools whose sandboxes bind workspaces of a store in a temporary
/// directory. Members go first (the store unmounts, lazily while workers
/// still hold their binds), then the pools; the sweeper and temp_dir make
/// sure nothing stays mounted or attached.
struct workspace_pool_fixture : test::pool_fixture {
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  std::shared_ptr<workspace_store> store;

  bool start() {
    if (auto why = test::workspace_kernel_lacks()) {
      test::skip(*why);
      return false;
    }
    auto owner = sandbox_owner();
    BOOST_REQUIRE(owner);
    auto s = workspace_store::open({tmp.file("workspaces"), *owner});
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    store = *s;
    return true;
  }

  workspace_lease lease_on(const std::string& name, uint64_t quota) {
    auto created = store->create(name, quota);
    BOOST_REQUIRE_MESSAGE(created, (created ? "" : created.error().describe()));
    auto lease = store->open_workspace(name);
    BOOST_REQUIRE_MESSAGE(lease, (lease ? "" : lease.error().describe()));
    return std::move(*lease);
  }

  /// A pool whose sandboxes bind `lease`'s workspace, under the policy
  /// `policy_name` of policies/ (none when empty).
  pool_actor pool_on(const workspace_lease& lease, const std::string& policy_name = "") {
    auto pc = test_pool(1);
    if (!policy_name.empty()) {
      const std::string dir = test::source_dir() + "/policies";
      auto doc = policy::parse_policy(
        R"({"version": 1, "extends": [")" + policy_name + R"("]})", "pool.json");
      BOOST_REQUIRE(doc);
      auto merged = policy::resolve_extends(*doc, dir, dir);
      BOOST_REQUIRE(merged);
      auto ok = apply_policy(*merged, pc);
      BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    }
    pc.sandbox.workspace_source = lease.host_path();
    return make(pc);
  }
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(workspace_pool_tests, workspace_pool_fixture)

BOOST_AUTO_TEST_CASE(what_one_pool_writes_in_a_workspace_the_next_pool_reads) {
  if (!start())
    return;
  auto lease = lease_on("notebook", 16 * mib);
  auto first = pool_on(lease);
  auto w = exec_code(first, "import os\n"
                            "open('/workspace/hello.txt', 'w').write('from the first pool')\n"
                            "os.mkdir('/workspace/sub')\n"
                            "print(os.getcwd(), os.getuid())\n");
  BOOST_TEST((w.error == error_class::ok), w.stderr_data);
  BOOST_TEST(w.stdout_data == "/workspace 1000\n", w.stdout_data);
  caf::anon_send(first, shutdown_atom::value);
  // On the host: the daemon reads it, and it belongs to the sandbox's host user.
  BOOST_TEST(slurp(lease.host_path() + "/hello.txt") == "from the first pool");
  struct stat st;
  BOOST_REQUIRE(::stat((lease.host_path() + "/hello.txt").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == sandbox_owner()->uid);
  BOOST_TEST(st.st_gid == sandbox_owner()->gid);
  // A new pool, under the default policy (fs default deny): the workspace
  // is still read and written.
  auto second = pool_on(lease, "default");
  auto r = exec_code(second, "print(open('/workspace/hello.txt').read())\n"
                             "open('/workspace/sub/more.txt', 'w').write('x')\n"
                             "import os; os.unlink('/workspace/sub/more.txt')\n"
                             "os.rmdir('/workspace/sub')\n"
                             "print(sorted(os.listdir('/workspace')))\n");
  BOOST_TEST((r.error == error_class::ok), r.detail << r.stderr_data << r.exception.message);
  BOOST_TEST(r.stdout_data == "from the first pool\n['hello.txt', 'lost+found']\n", r.stdout_data);
}

BOOST_AUTO_TEST_CASE(a_write_beyond_the_quota_gets_enospc_and_the_pool_goes_on) {
  if (!start())
    return;
  auto lease = lease_on("small", 8 * mib);
  auto pool = pool_on(lease);
  auto r = exec_code(pool, "import errno\n"
                           "chunk = b'x' * (1 << 20)\n"
                           "n = 0\n"
                           "try:\n"
                           "    with open('/workspace/big', 'wb') as f:\n"
                           "        for _ in range(32):\n"
                           "            f.write(chunk); f.flush(); n += 1\n"
                           "    print('no error after', n, 'MiB')\n"
                           "except OSError as e:\n"
                           "    print(errno.errorcode[e.errno], n < 8)\n");
  BOOST_TEST((r.error == error_class::ok), r.stderr_data);
  BOOST_TEST(r.stdout_data == "ENOSPC True\n", r.stdout_data);
  // The host's file system was not touched beyond the image's size.
  auto listed = store->list();
  BOOST_REQUIRE(listed);
  // (The image was allocated whole at create; its extent tree takes a few
  // blocks more.)
  BOOST_TEST(listed->front().image_bytes <= 8 * mib + 64 * 1024);
  BOOST_TEST(listed->front().free_bytes < 1 * mib);
  // The supervisor and the pool go on; freeing space makes room again.
  auto again = exec_code(pool, "import os\n"
                               "os.unlink('/workspace/big')\n"
                               "open('/workspace/small', 'w').write('fits')\n"
                               "print(open('/workspace/small').read())\n");
  BOOST_TEST((again.error == error_class::ok), again.stderr_data);
  BOOST_TEST(again.stdout_data == "fits\n");
}

BOOST_AUTO_TEST_CASE(the_workspace_holds_data_not_programs_or_devices) {
  if (!start())
    return;
  auto lease = lease_on("data", 8 * mib);
  auto pool = pool_on(lease);
  auto r = exec_code(pool, "import os, shutil, subprocess, stat\n"
                           "shutil.copy('/bin/true', '/workspace/t')\n"
                           "os.chmod('/workspace/t', 0o4755)\n"
                           "try:\n"
                           "    subprocess.run(['/workspace/t'])\n"
                           "    print('ran')\n"
                           "except PermissionError:\n"
                           "    print('exec refused')\n"
                           "try:\n"
                           "    os.mknod('/workspace/null', stat.S_IFCHR | 0o666, os.makedev(1, 3))\n"
                           "    print('made a device')\n"
                           "except PermissionError:\n"
                           "    print('mknod refused')\n");
  BOOST_TEST((r.error == error_class::ok), r.stderr_data);
  BOOST_TEST(r.stdout_data == "exec refused\nmknod refused\n", r.stdout_data);
  // The setuid bit the sandbox set means nothing on the host either.
  auto m = platform::mounts_at_or_below(lease.host_path());
  BOOST_REQUIRE(m);
  BOOST_REQUIRE_EQUAL(m->size(), 1u);
  auto text = slurp("/proc/self/mountinfo");
  const auto line_start = text.rfind('\n', text.find(" " + lease.host_path() + " ")) + 1;
  const auto line = text.substr(line_start, text.find('\n', line_start) - line_start);
  BOOST_TEST(line.find("nosuid") != std::string::npos, line);
  BOOST_TEST(line.find("nodev") != std::string::npos, line);
}

BOOST_AUTO_TEST_CASE(a_policy_rule_that_denies_writing_leaves_the_workspace_read_only) {
  if (!start())
    return;
  auto lease = lease_on("shown", 8 * mib);
  std::ofstream(lease.host_path() + "/given.txt") << "from the host";
  // readonly.json denies every write by a rule on "/": the workspace too.
  auto pool = pool_on(lease, "readonly");
  auto r = exec_code(pool, "import errno\n"
                           "print(open('/workspace/given.txt').read())\n"
                           "try:\n"
                           "    open('/workspace/new.txt', 'w')\n"
                           "except OSError as e:\n"
                           "    print(errno.errorcode[e.errno])\n");
  BOOST_TEST((r.error == error_class::ok), r.stderr_data);
  BOOST_TEST(r.stdout_data == "from the host\nEACCES\n", r.stdout_data);
}

BOOST_AUTO_TEST_SUITE_END()
