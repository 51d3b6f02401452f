/// @file install_anywhere_test.cpp
/// castellan installed (`cmake --install`) into a prefix below a directory
/// only its owner may enter — as Debian makes home directories (0700) — runs
/// sandboxed workers: the worker's user (nobody on the host) cannot search
/// that directory, so the worker binary is executed from an fd the
/// supervisor opened and the harness and policy paths are captured by the
/// supervisor. The installed CLI finds its worker, harness and pre-built
/// policies under its own prefix.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

using castellan::test::run_process;

namespace {

/// A 0700 directory (under /var/tmp: policy rules below /tmp speak of the
/// sandbox's own /tmp) holding an install of this build tree.
struct installed_tree {
  std::string home;
  std::string prefix;

  installed_tree() {
    char pattern[] = "/var/tmp/castellan-home-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
    home = pattern;
    BOOST_REQUIRE(::chmod(home.c_str(), 0700) == 0);
    prefix = home + "/prefix";
    auto r = run_process({CASTELLAN_CMAKE_COMMAND, "--install", castellan::test::build_dir(),
                          "--prefix", prefix},
                         {}, 120);
    BOOST_REQUIRE_MESSAGE(r.exit_code == 0, "cmake --install: " << r.out << r.err);
  }
  ~installed_tree() {
    std::error_code ec;
    std::filesystem::remove_all(home, ec);
  }

  castellan::test::process_result cli(std::vector<std::string> args) const {
    args.insert(args.begin(), prefix + "/bin/castellan");
    return run_process(args, {}, 120);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(install_anywhere)

BOOST_AUTO_TEST_CASE(the_worker_user_cannot_search_the_install) {
  // The precondition of every case below: were the worker to open the
  // install by path, it would fail.
  installed_tree t;
  struct stat st;
  BOOST_REQUIRE(::stat(t.home.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0700u);
  BOOST_TEST(st.st_uid == 0u, "the test runs as root, as `make test` does");
}

BOOST_AUTO_TEST_CASE(execs_and_runs_from_a_private_prefix) {
  installed_tree t;
  auto exec = t.cli({"exec", "print(6*7)"});
  BOOST_TEST(exec.exit_code == 0, exec.err);
  BOOST_TEST(exec.out == "42\n");
  auto run = t.cli({"run", "--", "/bin/echo", "hi"});
  BOOST_TEST(run.exit_code == 0, run.err);
  BOOST_TEST(run.out == "hi\n");
  auto warm = t.cli({"exec", "--warm-start", "print('warm')"});
  BOOST_TEST(warm.exit_code == 0, warm.err);
  BOOST_TEST(warm.out == "warm\n");
  auto shared = t.cli({"exec", "--mode", "shared", "print('shared')"});
  BOOST_TEST(shared.exit_code == 0, shared.err);
  BOOST_TEST(shared.out == "shared\n");
}

BOOST_AUTO_TEST_CASE(pre_built_policies_resolve_by_name_under_the_prefix) {
  installed_tree t;
  auto r = t.cli({"exec", "--policy", "strict", "--json", "print(1)"});
  BOOST_TEST(r.exit_code == 0, r.err);
  auto explain = t.cli({"policy", "explain", "-v", "strict", "--fs", "write_file:/etc/passwd"});
  BOOST_TEST(explain.exit_code == 0, explain.err);
  BOOST_TEST(explain.out.find("deny") != std::string::npos, explain.out);
  // The rule's origin is the installed file, not the source tree's.
  BOOST_TEST(explain.out.find(t.prefix + "/share/castellan/policies/") != std::string::npos,
             explain.out);
  auto missing = t.cli({"exec", "--policy", "no-such-policy", "pass"});
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(missing.err.find("no-such-policy") != std::string::npos, missing.err);
}

BOOST_AUTO_TEST_CASE(the_default_config_is_installed_and_checks_against_the_prefix) {
  installed_tree t;
  const std::string config = t.prefix + "/share/castellan/castellan.toml";
  auto r = t.cli({"config", "check", config});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == config + ": ok\npool default: policy default, size 4, mode isolated\n");
  // Its policy directory is the installed one: a pool naming a policy the
  // install lacks is refused with that directory in the message.
  const std::string other = t.home + "/other.toml";
  std::ofstream(other) << "[[pools]]\nname = \"x\"\npolicy = \"no-such-policy\"\n";
  auto bad = t.cli({"config", "check", other});
  BOOST_TEST(bad.exit_code == 1);
  BOOST_TEST(bad.err.find("no policy of that name in " + t.prefix + "/share/castellan/policies") !=
               std::string::npos,
             bad.err);
}

BOOST_AUTO_TEST_CASE(a_policy_path_below_a_private_directory_is_bound) {
  installed_tree t;
  const std::string data = t.home + "/data";
  std::filesystem::create_directory(data);
  std::ofstream(data + "/note.txt") << "private note\n";
  ::chmod((data + "/note.txt").c_str(), 0644);
  const std::string policy = t.home + "/reads-data.json";
  std::ofstream(policy) << R"({"version": 1, "extends": ["default"],
    "fs": {"rules": [{"action": "allow", "path": ")"
                        << data << R"(", "perms": ["read_file", "read_dir"]}]}})";
  auto r = t.cli({"exec", "--policy", policy, "print(open('" + data + "/note.txt').read(), end='')"});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out == "private note\n");
}

BOOST_AUTO_TEST_SUITE_END()
