#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/session/session_actor.hpp"
#include "actors/session/workspace_store.hpp"
#include "support/pool_fixture.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

/// A host directory outside the sandbox's default root (so that a policy
/// rule on it binds it), with one file in it, removed at the end.
struct host_dir {
  std::string path;
  host_dir() {
    std::string tmpl = "/var/tmp/castellan-overlay-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
    // Writable for the sandbox's user: without the overlay its writes
    // would land here (the control case checks that they do).
    BOOST_REQUIRE(::chmod(path.c_str(), 0777) == 0);
    // A file of the sandbox's own host ids, as a directory made writable
    // for it has them (host_permissions.hpp), and one of root's that it may
    // write too.
    auto owner = sandbox_owner();
    BOOST_REQUIRE(owner);
    std::ofstream(path + "/kept.txt") << "host";
    BOOST_REQUIRE(::chown((path + "/kept.txt").c_str(), owner->uid, owner->gid) == 0);
    std::ofstream(path + "/roots.txt") << "root";
    BOOST_REQUIRE(::chmod((path + "/roots.txt").c_str(), 0666) == 0);
  }
  ~host_dir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string read(const std::string& name) const {
    std::ifstream in(path + "/" + name);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool has(const std::string& name) const {
    struct stat st {};
    return ::lstat((path + "/" + name).c_str(), &st) == 0;
  }
};

struct overlay_fixture : test::pool_fixture {
  host_dir host;

  /// The default policy plus read and write on the host directory.
  pool_config writable_pool() {
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    pc.sandbox.tmp_size_bytes = 8u << 20;
    const std::string dir = test::source_dir() + "/policies";
    auto doc = policy::parse_policy(
      R"({"version": 1, "extends": ["default"], "fs": {"rules": [{"action": "allow", "path": ")" +
        host.path +
        R"(", "perms": ["read_file", "write_file", "read_dir", "write_dir", "truncate"]}]}})",
      "pool.json");
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : "policy errors"));
    auto merged = policy::resolve_extends(*doc, dir, dir);
    BOOST_REQUIRE_MESSAGE(merged, (merged ? "" : "extends errors"));
    auto ok = apply_policy(*merged, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    return pc;
  }

  session_actor start_session(const pool_config& base, const std::string& id) {
    session_config sc;
    sc.info.id = id;
    sc.info.pool = "base";
    sc.info.idle_ttl_ms = 600'000;
    sc.info.max_lifetime_ms = 600'000;
    sc.worker = session_worker_config(base, sc.info);
    auto s = spawn_session(sys, std::move(sc));
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    bool ready = false;
    self->request(*s, 60s, ready_atom::value)
      .receive([&](session_info&) { ready = true; },
               [&](caf::error& err) { BOOST_FAIL("session not ready: " << sys.render(err)); });
    BOOST_REQUIRE(ready);
    sessions.push_back(*s);
    return *s;
  }

  void destroy(const session_actor& s) {
    bool done = false;
    self->request(s, 30s, destroy_atom::value)
      .receive([&](session_stats&) { done = true; },
               [&](caf::error& err) { BOOST_FAIL("destroy: " << sys.render(err)); });
    BOOST_REQUIRE(done);
  }

  exec_result run(const session_actor& s, const std::string& code) {
    auto r = exec_code(s, code);
    BOOST_TEST_INFO("stdout: " << r.stdout_data << "\nstderr: " << r.stderr_data
                               << "\nerror: " << to_string(r.error) << " " << r.detail << " "
                               << r.exception.type << ": " << r.exception.message);
    return r;
  }

  ~overlay_fixture() {
    for (auto& s : sessions)
      caf::anon_send(s, destroy_atom::value);
  }

  std::vector<session_actor> sessions;
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(session_overlay_tests, overlay_fixture)

BOOST_AUTO_TEST_CASE(a_stateless_pool_writes_the_host_directory_the_policy_grants) {
  // The control: the same policy outside a session writes the host's files,
  // so the session case below shows the overlay, not a refused write.
  auto pool = make(writable_pool());
  auto r = exec_code(pool, "open('" + host.path + "/kept.txt', 'w').write('pool')\n"
                           "open('" + host.path + "/new.txt', 'w').write('pool')\n");
  BOOST_TEST_INFO("stderr: " << r.stderr_data);
  BOOST_REQUIRE(r.error == error_class::ok);
  BOOST_TEST(host.read("kept.txt") == "pool");
  BOOST_TEST(host.read("new.txt") == "pool");
}

BOOST_AUTO_TEST_CASE(a_session_writes_land_in_its_overlay_and_vanish_with_it) {
  const auto base = writable_pool();
  auto first = start_session(base, "s-00000000000000a1");
  auto w = run(first, "import os\n"
                      "open('" + host.path + "/kept.txt', 'w').write('session')\n"
                      "open('" + host.path + "/new.txt', 'w').write('session')\n"
                      "os.mkdir('" + host.path + "/sub')\n"
                      "open('" + host.path + "/sub/deep.txt', 'w').write('deep')\n");
  BOOST_REQUIRE(w.error == error_class::ok);
  // The host's directory is untouched.
  BOOST_TEST(host.read("kept.txt") == "host");
  BOOST_TEST(!host.has("new.txt"));
  BOOST_TEST(!host.has("sub"));
  // The session's next exec sees its own writes.
  auto r = run(first, "import os\n"
                      "print(open('" + host.path + "/kept.txt').read(),"
                      " open('" + host.path + "/new.txt').read(),"
                      " open('" + host.path + "/sub/deep.txt').read())\n"
                      "os.remove('" + host.path + "/kept.txt')\n"
                      "print(sorted(os.listdir('" + host.path + "')))\n");
  BOOST_REQUIRE(r.error == error_class::ok);
  BOOST_TEST(r.stdout_data == "session session deep\n['new.txt', 'roots.txt', 'sub']\n");
  BOOST_TEST(host.read("kept.txt") == "host"); // the removal too stays in the session

  // Another session sees the host's files only.
  auto second = start_session(base, "s-00000000000000a2");
  auto other = run(second, "import os\n"
                           "print(open('" + host.path + "/kept.txt').read(),"
                           " sorted(os.listdir('" + host.path + "')))\n");
  BOOST_REQUIRE(other.error == error_class::ok);
  BOOST_TEST(other.stdout_data == "host ['kept.txt', 'roots.txt']\n");

  destroy(first);
  destroy(second);
  BOOST_TEST(host.read("kept.txt") == "host");
  BOOST_TEST(!host.has("new.txt"));
}

BOOST_AUTO_TEST_CASE(a_file_of_ids_outside_the_sandbox_cannot_be_copied_up) {
  // An overlay made in the sandbox's user namespace copies a file up with
  // its owner, which must be mapped there: root's file, writable by all on
  // the host, is refused (EOVERFLOW) and stays as it was. Reading it works.
  auto s = start_session(writable_pool(), "s-00000000000000a5");
  auto r = run(s, "import errno\n"
                  "print(open('" + host.path + "/roots.txt').read())\n"
                  "try:\n"
                  "    open('" + host.path + "/roots.txt', 'a').write('session')\n"
                  "except OSError as e:\n"
                  "    print(errno.errorcode[e.errno])\n");
  BOOST_REQUIRE(r.error == error_class::ok);
  BOOST_TEST(r.stdout_data == "root\nEOVERFLOW\n");
  BOOST_TEST(host.read("roots.txt") == "root");
}

BOOST_AUTO_TEST_CASE(the_overlay_is_size_limited_and_the_session_goes_on) {
  auto s = start_session(writable_pool(), "s-00000000000000a3");
  // 8 MiB for the upper layers (tmp_size_bytes): 16 MiB does not fit.
  auto full = run(s, "import errno\n"
                     "try:\n"
                     "    with open('" + host.path + "/big', 'wb') as f:\n"
                     "        for _ in range(16):\n"
                     "            f.write(b'x' * (1 << 20))\n"
                     "except OSError as e:\n"
                     "    print(errno.errorcode[e.errno])\n");
  BOOST_REQUIRE(full.error == error_class::ok);
  BOOST_TEST(full.stdout_data == "ENOSPC\n");
  auto after = run(s, "import os\n"
                      "os.remove('" + host.path + "/big')\n"
                      "open('" + host.path + "/small', 'w').write('ok')\n"
                      "print(open('" + host.path + "/small').read())\n");
  BOOST_REQUIRE(after.error == error_class::ok);
  BOOST_TEST(after.stdout_data == "ok\n");
  BOOST_TEST(!host.has("big"));
  BOOST_TEST(!host.has("small"));
}

BOOST_AUTO_TEST_CASE(the_layers_are_out_of_the_sandbox_reach) {
  // The upper layers' tmpfs was detached from the root once the overlays
  // held it: no path inside leads to it, and the mount table shows the
  // overlay (whose options name the layer's path as it was) but no mount
  // of the layers' tmpfs.
  auto s = start_session(writable_pool(), "s-00000000000000a4");
  auto r = run(s, "import os\n"
                  "print(os.path.exists('/.castellan-upper'))\n"
                  "mounts = open('/proc/self/mountinfo').read()\n"
                  "print(' - tmpfs castellan-upper ' in mounts, ' - overlay castellan-overlay ' in mounts)\n");
  BOOST_REQUIRE(r.error == error_class::ok);
  BOOST_TEST(r.stdout_data == "False\nFalse True\n");
}

BOOST_AUTO_TEST_SUITE_END()
