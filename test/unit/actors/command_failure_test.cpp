// What the pool says about a command whose program the harness could not
// start: built from the RESULT's exec_error field (docs/wire.md), never
// from stderr, in both ways a harness starts a program (shared mode:
// subprocess in the harness; isolated mode: execvp in the zygote's child).

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

const exec_mode both_modes[] = {exec_mode::shared, exec_mode::isolated};

const char* name_of(exec_mode m) {
  return m == exec_mode::shared ? "shared" : "isolated";
}

struct command_pools : test::actor_system_fixture {
  ~command_pools() {
    for (auto& p : pools)
      caf::anon_send(p, shutdown_atom::value);
  }

  /// A pool of `mode` under policies/default.json (exec default deny:
  /// python3 only) that also lets /bin/sh run.
  pool_actor restricted(exec_mode mode) {
    auto pc = test_pool(1);
    pc.mode = mode;
    const std::string dir = test::source_dir() + "/policies";
    auto doc = policy::load_policy(dir + "/default.json", dir);
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : doc.to_failure().describe()));
    auto ok = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    BOOST_REQUIRE(pc.sandbox.restrict_execute);
    pc.sandbox.exec_allowed.push_back("/bin/sh");
    return spawn_one(std::move(pc));
  }

  pool_actor plain(exec_mode mode) {
    auto pc = test_pool(1);
    pc.mode = mode;
    return spawn_one(std::move(pc));
  }

  pool_actor spawn_one(pool_config pc) {
    auto pool = spawn_pool(sys, std::move(pc));
    BOOST_REQUIRE_MESSAGE(pool, (pool ? "" : pool.error().describe()));
    pools.push_back(*pool);
    return *pool;
  }

  exec_result command(const pool_actor& pool, std::vector<std::string> argv) {
    exec_request req;
    req.argv = std::move(argv);
    return exec(pool, std::move(req));
  }

  std::vector<pool_actor> pools;
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(command_failure_tests, command_pools)

BOOST_AUTO_TEST_CASE(a_program_the_exec_rules_refuse_is_named) {
  BOOST_REQUIRE(::access("/usr/bin/id", X_OK) == 0);
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = restricted(mode);
      auto r = command(pool, {"/usr/bin/id"});
      BOOST_TEST(r.exit_code == 126);
      BOOST_TEST(r.stderr_data == "castellan: /usr/bin/id: Permission denied\n");
      BOOST_TEST(r.detail.rfind("exec of /usr/bin/id refused: policy exec default deny "
                                "(/defaults/exec); allowed: ",
                                0) == 0u,
                 r.detail);
      BOOST_TEST(contains(r.detail, "/bin/sh"), r.detail);
      // A bare name: the harness looked it up on PATH, the pool names the file.
      auto bare = command(pool, {"id"});
      BOOST_TEST(bare.exit_code == 126);
      BOOST_TEST(contains(bare.detail, "exec of /usr/bin/id refused"), bare.detail);
      // The worker still serves.
      auto ok = command(pool, {"/bin/sh", "-c", "echo fine"});
      BOOST_TEST(ok.stdout_data == "fine\n");
      BOOST_TEST(ok.detail.empty(), ok.detail);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_program_that_prints_the_harness_line_is_not_the_harness) {
  // The very lines the harness writes when its exec fails, written by a
  // program that did start (a host program too, /bin/sh), with the status
  // the harness would give: the pool neither says the sandbox lacks
  // /bin/sh nor names a refused file (it can only hint at a nested exec).
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = restricted(mode);
      auto missing =
          command(pool, {"/bin/sh", "-c",
                         "echo 'castellan: /bin/sh: No such file or directory' >&2; exit 127"});
      BOOST_TEST(missing.exit_code == 127);
      BOOST_TEST(missing.stderr_data == "castellan: /bin/sh: No such file or directory\n");
      BOOST_TEST(missing.detail.empty(), missing.detail);
      auto refused =
          command(pool, {"/bin/sh", "-c",
                         "echo 'castellan: /usr/bin/id: Permission denied' >&2; exit 126"});
      BOOST_TEST(refused.exit_code == 126);
      BOOST_TEST(!contains(refused.detail, "exec of"), refused.detail);
      BOOST_TEST(contains(refused.detail, "names no file"), refused.detail);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_host_program_the_sandbox_does_not_see_is_explained) {
  std::string dir = "/var/tmp/castellan-hostprog-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(dir.data()) != nullptr);
  const std::string prog = dir + "/prog";
  { std::ofstream(prog) << "#!/bin/sh\necho from the host\n"; }
  BOOST_REQUIRE(::chmod(prog.c_str(), 0755) == 0);
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = plain(mode);
      auto r = command(pool, {prog});
      BOOST_TEST(r.exit_code == 127);
      BOOST_TEST(r.stderr_data == "castellan: " + prog + ": No such file or directory\n");
      BOOST_TEST(r.detail.rfind(prog + " is on this host but not inside the sandbox", 0) == 0u,
                 r.detail);
      // One that exists nowhere: nothing to explain.
      auto nowhere = command(pool, {"/nonexistent/program"});
      BOOST_TEST(nowhere.exit_code == 127);
      BOOST_TEST(nowhere.detail.empty(), nowhere.detail);
    }
  }
  ::unlink(prog.c_str());
  ::rmdir(dir.c_str());
}

BOOST_AUTO_TEST_CASE(a_worker_that_forges_an_exec_error_is_replaced) {
  // Shared mode: the code runs in the harness and can write frames itself.
  // An exec_error on a CODE request's RESULT, or one of the wrong shape, is
  // a protocol violation: the worker goes, the pool carries on.
  const std::string forge =
      "import gc, json\n"
      "h = next(o for o in gc.get_objects() if type(o).__name__ == 'Harness')\n"
      "h.wire.send(0x07, h.request_id, json.dumps({'exit_code': 126, 'exception': None,\n"
      "  'exec_error': FIELD}).encode())\n"
      "import time; time.sleep(5)\n";
  for (const char* field : {R"({'program': '/usr/bin/id', 'errno': 13})",
                            R"({'program': '/usr/bin/id', 'errno': 'EACCES'})"}) {
    BOOST_TEST_CONTEXT(field) {
      auto pool = plain(exec_mode::shared);
      std::string code = forge;
      code.replace(code.find("FIELD"), 5, field);
      exec_request req;
      req.code = code;
      auto r = exec(pool, std::move(req));
      BOOST_TEST((r.error == error_class::worker_lost), r.detail);
      BOOST_TEST(contains(r.detail, "exec"), r.detail);
      auto next = exec(pool, [] {
        exec_request again;
        again.code = "print('alive')";
        return again;
      }());
      BOOST_TEST(next.stdout_data == "alive\n");
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()
