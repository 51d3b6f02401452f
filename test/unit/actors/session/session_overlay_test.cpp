#include <boost/test/unit_test.hpp>

#include <sys/mount.h>
#include <unistd.h>

#include <fstream>

#include "support/session_overlay_fixture.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace std::chrono_literals;

BOOST_FIXTURE_TEST_SUITE(session_overlay_tests, test::overlay_fixture)

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

BOOST_AUTO_TEST_CASE(a_file_the_policy_makes_writable_is_bound_read_only) {
  // An overlay covers directories: a session granted write on one host file
  // gets it read-only (the pool writes it; the session never does).
  auto s = start_session(writable_pool(host.path + "/kept.txt"), "s-00000000000000a6");
  auto r = run(s, "import errno\n"
                  "print(open('" + host.path + "/kept.txt').read())\n"
                  "try:\n"
                  "    open('" + host.path + "/kept.txt', 'w').write('session')\n"
                  "except OSError as e:\n"
                  "    print(errno.errorcode[e.errno])\n");
  BOOST_REQUIRE(r.error == error_class::ok);
  BOOST_TEST(r.stdout_data == "host\nEROFS\n");
  BOOST_TEST(host.read("kept.txt") == "host");
}

BOOST_AUTO_TEST_CASE(a_directory_with_mounts_below_it_is_not_overlaid) {
  // The overlay's lower layer would be the directory's own file system and
  // show what a mount below it covers on the host (a service's PrivateTmp=
  // over /var/tmp, say): the session is refused, naming the mount.
  if (::geteuid() != 0) {
    test::skip("mounting over the host directory needs root");
    return;
  }
  const std::string covered = host.path + "/covered";
  BOOST_REQUIRE(::mkdir(covered.c_str(), 0755) == 0);
  std::ofstream(covered + "/hidden") << "hidden by the mount";
  BOOST_REQUIRE(::mount("castellan-test", covered.c_str(), "tmpfs", 0, "size=1m") == 0);
  struct unmount {
    std::string path;
    ~unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } guard{covered};
  auto s = try_start_session(writable_pool(), "s-00000000000000a7");
  BOOST_REQUIRE(!s);
  const std::string why = sys.render(s.error());
  BOOST_TEST_INFO(why);
  BOOST_TEST(why.find("has mounts below it (" + covered + ")") != std::string::npos);
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
