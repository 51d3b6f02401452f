// Session overlay probes: hostile code in a session whose policy makes a
// host directory writable, against the host's files under the overlay
// (docs/sessions.md, "Writes outside /workspace"). Each probe runs after
// probe_prelude.py, with HOST naming the directory.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "support/session_overlay_fixture.hpp"

using namespace castellan;

namespace {

struct overlay_probes : test::overlay_fixture {
  /// Runs probes/NAME.py in `s` after the prelude and `preamble`; its verdict.
  std::string probe(const session_actor& s, const std::string& name,
                    const std::string& preamble = "") {
    const std::string dir = test::source_dir() + "/test/escapes/";
    std::ifstream prelude(dir + "probe_prelude.py");
    std::ifstream in(dir + "probes/" + name + ".py");
    BOOST_REQUIRE_MESSAGE(prelude, "probe_prelude.py not found");
    BOOST_REQUIRE_MESSAGE(in, "probe " << name << " not found");
    std::ostringstream code;
    code << prelude.rdbuf() << "HOST = '" << host.path << "'\n" << preamble << in.rdbuf();
    auto r = run(s, code.str());
    BOOST_TEST_MESSAGE(name << ": " << to_string(r.error) << " stdout '" << r.stdout_data << "'"
                            << (r.exception.type.empty()
                                  ? ""
                                  : " exception: " + r.exception.type + ": " + r.exception.message));
    BOOST_REQUIRE(r.error == error_class::ok);
    const auto pos = r.stdout_data.rfind("verdict: ");
    BOOST_REQUIRE(pos != std::string::npos);
    const auto end = r.stdout_data.find('\n', pos);
    return r.stdout_data.substr(pos + 9, end == std::string::npos ? end : end - pos - 9);
  }

  std::string listed() const {
    std::string out;
    for (const auto& e : std::filesystem::directory_iterator(host.path))
      out += e.path().filename().string() + " ";
    return out;
  }
};

struct stat_of {
  struct stat st {};
  explicit stat_of(const std::string& path) { BOOST_REQUIRE(::lstat(path.c_str(), &st) == 0); }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(session_overlay_probes, overlay_probes)

BOOST_AUTO_TEST_CASE(host_writes) {
  BOOST_REQUIRE(::mkdir((host.path + "/dir").c_str(), 0777) == 0);
  const std::string kept = host.path + "/kept.txt";
  const stat_of before(kept);
  auto s = start_session(writable_pool(), "s-00000000000000b1");
  BOOST_TEST(probe(s, "session_overlay_host_writes") == "ok ok ok ok ok ok ok EXDEV EPERM");
  // On the host: the file as it was, nothing added, nothing moved.
  const stat_of after(kept);
  BOOST_TEST(host.read("kept.txt") == "host");
  BOOST_TEST(after.st.st_size == before.st.st_size);
  BOOST_TEST(after.st.st_mode == before.st.st_mode);
  BOOST_TEST(after.st.st_nlink == 1u);
  BOOST_TEST(after.st.st_mtim.tv_sec == before.st.st_mtim.tv_sec);
  BOOST_TEST(::listxattr(kept.c_str(), nullptr, 0) == 0);
  BOOST_TEST(host.has("dir"));
  for (const char* name : {"kept-link", "moved.txt", "dir2", "wh"})
    BOOST_TEST(!host.has(name), name << " appeared on the host: " << listed());
}

BOOST_AUTO_TEST_CASE(forged_overlay_xattrs) {
  // Of the sandbox's host ids, as a directory made writable for it has
  // them: the overlay can copy them up (and so take the forged xattrs).
  auto owner = sandbox_owner();
  BOOST_REQUIRE(owner);
  for (const char* d : {"/sub", "/other"}) {
    BOOST_REQUIRE(::mkdir((host.path + d).c_str(), 0755) == 0);
    BOOST_REQUIRE(::chown((host.path + d).c_str(), owner->uid, owner->gid) == 0);
  }
  for (const char* f : {"/sub/a", "/other/b"}) {
    std::ofstream(host.path + f) << f;
    BOOST_REQUIRE(::chown((host.path + f).c_str(), owner->uid, owner->gid) == 0);
  }
  auto s = start_session(writable_pool(), "s-00000000000000b2");
  BOOST_TEST(probe(s, "session_overlay_xattrs", "PHASE = 1\n") == "planted EPERM");
  BOOST_TEST(probe(s, "session_overlay_xattrs", "PHASE = 2\n") == "a - wf 0");
  BOOST_TEST(!host.has("newd"));
  BOOST_TEST(!host.has("wf"));
}

BOOST_AUTO_TEST_SUITE_END()
