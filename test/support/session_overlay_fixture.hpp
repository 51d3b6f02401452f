#pragma once

/// @file session_overlay_fixture.hpp
/// Sessions whose policy makes a host directory writable, which a session
/// overlays (docs/sessions.md, "Writes outside /workspace"): the directory,
/// the policy, sessions started straight from spawn_session.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/session/session_actor.hpp"
#include "actors/session/workspace_store.hpp"
#include "support/pool_fixture.hpp"

namespace castellan::test {

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

struct overlay_fixture : pool_fixture {
  host_dir host;

  /// The default policy plus read and write on `granted` (the host
  /// directory when empty).
  pool_config writable_pool(std::string granted = {}) {
    if (granted.empty())
      granted = host.path;
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    pc.sandbox.tmp_size_bytes = 8u << 20;
    const std::string dir = source_dir() + "/policies";
    auto doc = policy::parse_policy(
      R"({"version": 1, "extends": ["default"], "fs": {"rules": [{"action": "allow", "path": ")" +
        granted +
        R"(", "perms": ["read_file", "write_file", "read_dir", "write_dir", "truncate"]}]}})",
      "pool.json");
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : "policy errors"));
    auto merged = policy::resolve_extends(*doc, dir, dir);
    BOOST_REQUIRE_MESSAGE(merged, (merged ? "" : "extends errors"));
    auto ok = apply_policy(*merged, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    return pc;
  }

  /// Starts a session from `base` and waits until it is ready: its handle,
  /// or why it did not start.
  caf::expected<session_actor> try_start_session(const pool_config& base, const std::string& id) {
    session_config sc;
    sc.info.id = id;
    sc.info.pool = "base";
    sc.info.idle_ttl_ms = 600'000;
    sc.info.max_lifetime_ms = 600'000;
    sc.worker = session_worker_config(base, sc.info, nullptr);
    auto s = spawn_session(sys, std::move(sc));
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sessions.push_back(*s);
    caf::expected<session_actor> out{*s};
    self->request(*s, std::chrono::seconds(60), ready_atom::value)
      .receive([](session_info&) {}, [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  session_actor start_session(const pool_config& base, const std::string& id) {
    auto s = try_start_session(base, id);
    BOOST_REQUIRE_MESSAGE(s, "session not ready: " << (s ? "" : sys.render(s.error())));
    return *s;
  }

  void destroy(const session_actor& s) {
    bool done = false;
    self->request(s, std::chrono::seconds(30), destroy_atom::value)
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

} // namespace castellan::test
