// A request's environment, working directory and stdin (exec_request::env,
// cwd, stdin_data; the SETUP frame of docs/wire.md) reach the code and the
// program, in both ways a worker runs them (shared mode: in the harness's
// process; isolated mode: in the zygote's child), and go with the request:
// the next request on the same worker finds none of them.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <string>

#include "actors/pool/exec_setup.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

const exec_mode both_modes[] = {exec_mode::shared, exec_mode::isolated};

const char* name_of(exec_mode m) {
  return m == exec_mode::shared ? "shared" : "isolated";
}

struct setup_pools : test::actor_system_fixture {
  ~setup_pools() {
    for (auto& p : pools)
      caf::anon_send(p, shutdown_atom::value);
  }

  /// One worker, so that consecutive requests meet the same process.
  pool_actor one_worker(exec_mode mode, uint32_t ring_capacity = 1u << 20) {
    auto pc = test_pool(1);
    pc.mode = mode;
    pc.ring_capacity = ring_capacity;
    pc.code_limit = std::min<uint64_t>(pc.code_limit, ring_capacity / 4);
    auto pool = spawn_pool(sys, std::move(pc));
    BOOST_REQUIRE_MESSAGE(pool, (pool ? "" : pool.error().describe()));
    pools.push_back(*pool);
    return *pool;
  }

  /// The error a request is refused with before it runs ("" if none).
  std::string refusal(const pool_actor& pool, exec_request req) {
    std::string out;
    self->request(pool, std::chrono::seconds(30), exec_atom::value, std::move(req))
      .receive([&](exec_result& r) { out = "ran: " + r.detail; },
               [&](caf::error& err) { out = sys.render(err); });
    return out;
  }

  std::vector<pool_actor> pools;
};

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

/// Every byte value, and more than a pipe holds.
std::string binary_stdin() {
  std::string s;
  for (int i = 0; i < 600 * 1024; ++i)
    s.push_back(static_cast<char>((i * 7 + i / 256) & 0xFF));
  return s;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(exec_setup_tests, setup_pools)

BOOST_AUTO_TEST_CASE(code_sees_its_env_cwd_and_stdin) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.code = "import os, sys\n"
                 "print(repr(sys.stdin.read()))\n"
                 "print(os.environ['GREETING'], os.environ['EMPTY'] == '', os.getcwd())\n"
                 "print(os.read(0, 5))\n";
      req.env = {"GREETING=first", "EMPTY=", "GREETING=hello world"};
      req.cwd = "/usr/lib";
      req.stdin_data = "line one\nline two\n";
      auto r = exec(pool, req);
      BOOST_TEST((r.error == error_class::ok), r.detail << r.stderr_data);
      BOOST_TEST(r.stdout_data == "'line one\\nline two\\n'\nhello world True /usr/lib\nb''\n",
                 r.stdout_data);
    }
  }
}

BOOST_AUTO_TEST_CASE(a_program_sees_its_env_cwd_and_stdin) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.argv = {"/bin/sh", "-c", "cat; echo \"[$NAME]\"; pwd"};
      req.env = {"NAME=value with spaces"};
      req.cwd = "/usr";
      req.stdin_data = "from stdin\n";
      auto r = exec(pool, req);
      BOOST_TEST(r.exit_code == 0, r.detail << r.stderr_data);
      BOOST_TEST(r.stdout_data == "from stdin\n[value with spaces]\n/usr\n", r.stdout_data);
    }
  }
}

BOOST_AUTO_TEST_CASE(binary_stdin_larger_than_a_pipe_arrives_whole) {
  const std::string data = binary_stdin();
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request code;
      code.code = "import sys, hashlib\n"
                  "b = sys.stdin.buffer.read()\n"
                  "print(len(b), hashlib.sha256(b).hexdigest())\n";
      code.stdin_data = data;
      auto r = exec(pool, code);
      exec_request cmd;
      cmd.argv = {"/bin/sh", "-c", "wc -c"};
      cmd.stdin_data = data;
      auto c = exec(pool, cmd);
      BOOST_TEST(r.stdout_data.rfind(std::to_string(data.size()) + " ", 0) == 0u, r.stdout_data);
      BOOST_TEST(c.stdout_data == std::to_string(data.size()) + "\n", c.stdout_data);
      // The digest of what was sent, from the code's side and from ours.
      exec_request digest;
      digest.code = "import hashlib, sys\n"
                    "print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())\n";
      digest.stdin_data = data;
      auto d = exec(pool, digest);
      BOOST_TEST(contains(r.stdout_data, d.stdout_data.substr(0, 64)), r.stdout_data);
    }
  }
}

BOOST_AUTO_TEST_CASE(the_next_request_on_the_worker_finds_none_of_it) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      const std::string probe = "import os, stat, sys\n"
                                "print(os.environ.get('LEAK'), os.getcwd(),\n"
                                "      repr(sys.stdin.read()),\n"
                                "      stat.S_ISCHR(os.fstat(0).st_mode))\n";
      auto before = exec_code(pool, probe);
      exec_request req;
      req.code = "import os\nprint(os.getpid())\n";
      req.env = {"LEAK=secret"};
      req.cwd = "/usr/lib";
      req.stdin_data = "secret stdin";
      auto during = exec(pool, req);
      exec_request cmd;
      cmd.argv = {"/bin/sh", "-c", "cat >/dev/null"};
      cmd.env = {"LEAK=secret2"};
      cmd.cwd = "/usr";
      cmd.stdin_data = "secret stdin 2";
      auto during_cmd = exec(pool, cmd);
      auto after = exec_code(pool, probe);
      BOOST_TEST((during.error == error_class::ok));
      BOOST_TEST(during_cmd.exit_code == 0, during_cmd.stderr_data);
      BOOST_TEST(before.worker_id == after.worker_id);
      BOOST_TEST((before.error == error_class::ok), before.stderr_data);
      // No variable, the worker's own directory, an empty stdin on
      // /dev/null (a character device), as before.
      BOOST_TEST(after.stdout_data == before.stdout_data);
      BOOST_TEST(contains(after.stdout_data, "None "), after.stdout_data);
      BOOST_TEST(contains(after.stdout_data, " '' True"), after.stdout_data);
    }
  }
}

BOOST_AUTO_TEST_CASE(what_shared_code_did_to_its_process_does_not_reach_the_next_setup) {
  // Shared mode: one interpreter for every request. Code that closes fd 0,
  // puts a pipe of its own there, or replaces os.write and os.environb must
  // not break the next request's stdin and environment, nor read them.
  auto pool = one_worker(exec_mode::shared);
  auto closer = exec_code(pool, "import os\nos.close(0)\n");
  exec_request after_close;
  after_close.code = "import sys\nprint(sys.stdin.read())\n";
  after_close.stdin_data = "after close";
  auto r1 = exec(pool, after_close);
  BOOST_TEST(r1.worker_id == closer.worker_id);
  BOOST_TEST(r1.stdout_data == "after close\n", r1.stdout_data << r1.stderr_data << r1.detail);

  exec_code(pool, "import os\nr, w = os.pipe()\nos.write(w, b'planted')\nos.dup2(r, 0)\n");
  auto r2 = exec_code(pool, "import os, stat\n"
                            "print(os.read(0, 100), stat.S_ISCHR(os.fstat(0).st_mode))\n");
  BOOST_TEST(r2.stdout_data == "b'' True\n", r2.stdout_data << r2.stderr_data);

  exec_code(pool, "import os, builtins\n"
                  "builtins.seen = []\n"
                  "real_write = os.write\n"
                  "os.write = lambda fd, b: (builtins.seen.append(bytes(b)), real_write(fd, b))[1]\n"
                  "os.environb = {}\n");
  exec_request victim;
  victim.code = "import os, sys\nprint(os.environ.get('TOKEN'), sys.stdin.read())\n";
  victim.env = {"TOKEN=victim-token"};
  victim.stdin_data = "victim-stdin";
  auto r3 = exec(pool, victim);
  BOOST_TEST(r3.stdout_data == "victim-token victim-stdin\n", r3.stdout_data << r3.stderr_data);
  auto spy = exec_code(pool, "import builtins\nprint(getattr(builtins, 'seen', None))\n");
  BOOST_TEST(spy.stdout_data.find("victim") == std::string::npos, spy.stdout_data);
}

BOOST_AUTO_TEST_CASE(a_directory_that_cannot_be_entered_runs_nothing) {
  for (const auto mode : both_modes) {
    BOOST_TEST_CONTEXT(name_of(mode)) {
      auto pool = one_worker(mode);
      exec_request req;
      req.code = "print('ran')";
      req.cwd = "/no/such/dir";
      auto r = exec(pool, req);
      BOOST_TEST(r.exit_code == 126);
      BOOST_TEST(r.stdout_data.empty(), r.stdout_data);
      BOOST_TEST(r.stderr_data == "castellan: cannot enter the working directory '/no/such/dir': "
                                  "No such file or directory\n",
                 r.stderr_data);
      exec_request cmd;
      cmd.argv = {"/bin/sh", "-c", "echo ran"};
      cmd.cwd = "/usr/bin/env";
      auto c = exec(pool, cmd);
      BOOST_TEST(c.exit_code == 126);
      BOOST_TEST(c.stdout_data.empty(), c.stdout_data);
      BOOST_TEST(contains(c.stderr_data, "'/usr/bin/env': Not a directory"), c.stderr_data);
      // The worker serves on.
      auto ok = exec_code(pool, "print('fine')");
      BOOST_TEST(ok.stdout_data == "fine\n");
    }
  }
}

BOOST_AUTO_TEST_CASE(what_cannot_be_sent_is_refused_before_it_runs) {
  auto pool = one_worker(exec_mode::shared, 64 * 1024);
  exec_request big;
  big.code = "print(1)";
  big.stdin_data.assign(64 * 1024, 'x');
  auto r = exec(pool, big);
  BOOST_TEST((r.error == error_class::limit_exceeded));
  BOOST_TEST(contains(r.detail, "the ring holds 65536"), r.detail);
  exec_request no_eq;
  no_eq.code = "print(1)";
  no_eq.env = {"A=1", "NOVALUE"};
  BOOST_TEST(contains(refusal(pool, no_eq), "env[1]: 'NOVALUE' is not NAME=VALUE"));
  exec_request no_name;
  no_name.code = "print(1)";
  no_name.env = {"=x"};
  BOOST_TEST(contains(refusal(pool, no_name), "env[0]: the name is empty"));
  exec_request relative;
  relative.code = "print(1)";
  relative.cwd = "tmp";
  BOOST_TEST(contains(refusal(pool, relative), "cwd: 'tmp' is not an absolute path"));
  exec_request nul;
  nul.code = "print(1)";
  nul.cwd = std::string("/tmp\0x", 6);
  BOOST_TEST(contains(refusal(pool, nul), "cwd: contains a NUL byte"));
  // The worker was never touched.
  auto ok = exec_code(pool, "print('fine')");
  BOOST_TEST(ok.stdout_data == "fine\n");
}

BOOST_AUTO_TEST_CASE(the_setup_payload_is_the_documented_layout) {
  exec_request req;
  req.cwd = "/w";
  req.env = {"A=1", "B="};
  req.stdin_data = std::string("x\0y", 3);
  const std::string p = encode_setup(req);
  const std::string want = std::string("\x02\0\0\0", 4) + std::string("\x07\0\0\0", 4) +
                           std::string("\x03\0\0\0", 4) + std::string("\0\0\0\0", 4) + "/w" +
                           std::string("A=1\0B=\0", 7) + std::string("x\0y", 3);
  BOOST_TEST(p == want);
  BOOST_TEST(has_setup(req));
  BOOST_TEST(!has_setup(exec_request{}));
}

BOOST_AUTO_TEST_SUITE_END()
