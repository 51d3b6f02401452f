/// @file policy_conformance_test.cpp
/// Does the kernel do what `castellan policy explain` says? For every
/// pre-built policy, a pool is started from it and each generated operation
/// (create, write, read, truncate, list, remove across the sandbox's tree;
/// run a program) runs as one exec in that pool's sandbox. Its outcome is
/// compared with decide_in_sandbox — what `policy explain` prints for the
/// same query — on the sandbox spec the pool's workers get. Every
/// disagreement is printed with its policy, operation and both answers, and
/// the test fails unless there are none.
///
/// An operation on a path the sandbox does not have (ENOENT) has nothing to
/// compare and is counted apart; so is one whose precondition failed (the
/// file it needs could not be created under this policy).

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <map>
#include <sstream>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/sandbox_fs_rights.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/host_permissions.hpp"
#include "support/actor_system_fixture.hpp"

#include <nlohmann/json.hpp>

using namespace castellan;
namespace pol = castellan::policy;

namespace {

struct operation {
  std::string perm; ///< a policy permission name, or "exec"
  std::string path;
};

/// The operations, in order: what one creates, the next ones use.
std::vector<operation> operations(const std::string& host_dir,
                                  const std::vector<std::string>& writable_dirs) {
  std::vector<operation> ops;
  for (const std::string& dir : std::vector<std::string>{"/tmp", "/dev/shm"}) {
    const std::string f = dir + "/conformance-file";
    const std::string d = dir + "/conformance-dir";
    ops.push_back({"make_reg", f});
    ops.push_back({"write_file", f});
    ops.push_back({"read_file", f});
    ops.push_back({"truncate", f});
    ops.push_back({"make_dir", d});
    ops.push_back({"read_dir", d});
    ops.push_back({"remove_dir", d});
    ops.push_back({"remove_file", f});
    ops.push_back({"read_dir", dir});
  }
  for (const std::string& dir : std::vector<std::string>{"/", "/etc", "/usr", "/usr/lib", "/proc",
                                                        "/dev", sandbox_harness_dir}) {
    ops.push_back({"make_reg", (dir == "/" ? "" : dir) + "/conformance-new"});
    ops.push_back({"make_dir", (dir == "/" ? "" : dir) + "/conformance-newdir"});
    ops.push_back({"read_dir", dir});
  }
  for (const char* f :
       {"/etc/passwd", "/etc/group", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ld.so.cache",
        "/etc/localtime", "/etc/ssl/openssl.cnf", "/etc/services", "/etc/shadow",
        "/usr/bin/python3", "/bin/sh", "/lib64/ld-linux-x86-64.so.2", "/proc/self/status",
        "/proc/1/status", "/dev/null", "/dev/zero", "/dev/urandom"}) {
    ops.push_back({"read_file", f});
    ops.push_back({"write_file", f});
  }
  ops.push_back({"read_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"write_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"remove_file", std::string(sandbox_harness_dir) + "/castellan_wire.py"});
  ops.push_back({"remove_file", "/etc/hosts"});
  ops.push_back({"remove_file", "/usr/bin/python3"});
  // A host directory the policy binds (the test adds a read rule for it).
  ops.push_back({"read_dir", host_dir});
  ops.push_back({"read_file", host_dir + "/data.txt"});
  ops.push_back({"write_file", host_dir + "/data.txt"});
  ops.push_back({"make_reg", host_dir + "/conformance-new"});
  // Host directories the policy makes writable: one the sandbox's host uid
  // owns, one it does not (the host's mode bits refuse what the policy allows).
  for (const auto& dir : writable_dirs) {
    ops.push_back({"make_reg", dir + "/conformance-new"});
    ops.push_back({"write_file", dir + "/data.txt"});
    ops.push_back({"read_file", dir + "/data.txt"});
    ops.push_back({"make_dir", dir + "/conformance-dir"});
    ops.push_back({"remove_dir", dir + "/conformance-dir"});
    ops.push_back({"remove_file", dir + "/conformance-new"});
  }
  for (const char* prog : {"/usr/bin/python3", "/bin/sh", "/usr/bin/id", "/usr/bin/env"})
    ops.push_back({"exec", prog});
  return ops;
}

/// Python that performs `op` and prints "ok" or the errno's name.
std::string code_for(const operation& op) {
  std::ostringstream py;
  py << "import errno, os, subprocess\nP = " << nlohmann::json(op.path).dump() << "\n";
  std::string call;
  if (op.perm == "read_file")
    call = "open(P, 'rb').close()";
  else if (op.perm == "write_file")
    call = "os.close(os.open(P, os.O_WRONLY))";
  else if (op.perm == "truncate")
    call = "os.truncate(P, 0)";
  else if (op.perm == "make_reg")
    call = "os.close(os.open(P, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600))";
  else if (op.perm == "make_dir")
    call = "os.mkdir(P)";
  else if (op.perm == "read_dir")
    call = "os.listdir(P)";
  else if (op.perm == "remove_file")
    call = "os.unlink(P)";
  else if (op.perm == "remove_dir")
    call = "os.rmdir(P)";
  if (op.perm == "exec") {
    py << "try:\n"
          "    args = [P, '-c', 'pass'] if 'python' in P else [P, '-c', 'exit 0'] if P.endswith('/sh') else [P]\n"
          "    # pipes, not /dev/null: opening it for writing is a policy question of its own\n"
          "    r = subprocess.run(args, input=b'', capture_output=True, timeout=20)\n"
          "    print('ok' if r.returncode == 0 else 'exit%d' % r.returncode)\n"
          "except OSError as e:\n"
          "    print(errno.errorcode.get(e.errno, str(e.errno)))\n";
  } else {
    py << "try:\n    " << call << "\n    print('ok')\n"
       << "except OSError as e:\n    print(errno.errorcode.get(e.errno, str(e.errno)))\n";
  }
  return py.str();
}

/// What explain says: allow (true) or deny (false).
bool explained_allow(const platform::sandbox_spec& spec, const pol::compiled_policy& policy,
                     const operation& op, std::string& by) {
  if (op.perm == "exec") {
    const pol::decision e = policy.check_exec(op.path);
    const sandbox_decision fs =
      decide_in_sandbox(spec, policy, op.path, pol::to_access(pol::fs_perm::execute));
    by = std::string("exec ") + std::string(e.pointer) + ", fs " + fs.by;
    return e.verdict != pol::action::deny && fs.verdict != pol::action::deny;
  }
  auto perm = pol::parse_fs_perm(op.perm);
  BOOST_REQUIRE_MESSAGE(perm, "unknown permission " << op.perm);
  const sandbox_decision d = decide_in_sandbox(spec, policy, op.path, *perm);
  by = d.by;
  return d.verdict != pol::action::deny;
}

struct conformance_fixture : test::actor_system_fixture {
  std::string host_dir;
  std::vector<std::string> writable_dirs;
  conformance_fixture() {
    host_dir = make_dir();
    std::ofstream(host_dir + "/data.txt") << "host data\n";
    // Writable by the policy: owned by root, and by the sandbox's host uid
    // (65534 under a root supervisor, else the supervisor's own).
    auto ids = platform::default_sandbox_host_ids();
    BOOST_REQUIRE_MESSAGE(ids, (ids ? "" : ids.error().describe()));
    for (const uid_t owner : {uid_t{0}, uid_t(ids->uid)}) {
      const std::string dir = make_dir();
      std::ofstream(dir + "/data.txt") << "host data\n";
      if (::geteuid() == 0) {
        BOOST_REQUIRE(::chown(dir.c_str(), owner, owner) == 0);
        BOOST_REQUIRE(::chown((dir + "/data.txt").c_str(), owner, owner) == 0);
      }
      writable_dirs.push_back(dir);
    }
  }
  ~conformance_fixture() {
    std::error_code ec;
    std::filesystem::remove_all(host_dir, ec);
    for (const auto& d : writable_dirs)
      std::filesystem::remove_all(d, ec);
  }
  static std::string make_dir() {
    char pattern[] = "/var/tmp/castellan-conformance-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
    ::chmod(pattern, 0755);
    return pattern;
  }
  /// What an earlier policy's operations left in the writable directories.
  void reset_writable_dirs() const {
    std::error_code ec;
    for (const auto& d : writable_dirs) {
      std::filesystem::remove_all(d + "/conformance-new", ec);
      std::filesystem::remove_all(d + "/conformance-dir", ec);
    }
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(policy_conformance, conformance_fixture)

BOOST_AUTO_TEST_CASE(every_prebuilt_policy_does_what_explain_says) {
  const std::string dir = test::source_dir() + "/policies";
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().extension() == ".json" && e.path().stem() != "schema")
      names.push_back(e.path().stem().string());
  std::sort(names.begin(), names.end());
  BOOST_REQUIRE(names.size() >= 10u);

  const auto ops = operations(host_dir, writable_dirs);
  std::size_t compared = 0, absent = 0, disagreements = 0;
  std::map<std::string, std::size_t> outcomes;
  for (const auto& name : names) {
    // The pre-built policy, plus read access to one host directory and
    // write access to two (binds outside the default root).
    nlohmann::json rules = nlohmann::json::array();
    rules.push_back({{"action", "allow"}, {"path", host_dir}, {"perms", {"read_file", "read_dir"}}});
    for (const auto& d : writable_dirs)
      rules.push_back({{"action", "allow"},
                       {"path", d},
                       {"perms",
                        {"read_file", "read_dir", "write_file", "truncate", "make_reg", "make_dir",
                         "remove_file", "remove_dir"}}});
    std::ofstream(host_dir + "/policy.json")
      << nlohmann::json{{"version", 1},
                        {"extends", {dir + "/" + name + ".json"}},
                        {"fs", {{"rules", rules}}}}
           .dump();
    reset_writable_dirs();
    auto doc = pol::load_policy(host_dir + "/policy.json", dir);
    BOOST_REQUIRE_MESSAGE(doc, name << ": " << (doc ? "" : doc.to_failure().describe()));
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    auto applied = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(applied, name << ": " << (applied ? "" : applied.error().describe()));
    if (pc.isolation != platform::isolation_mode::namespaces)
      continue; // no sandbox: nothing for the kernel to enforce
    pc.default_timeout_ms = 30000;
    auto spec = make_sandbox_spec(pc.sandbox, pc.harness);
    BOOST_REQUIRE_MESSAGE(spec, name << ": " << (spec ? "" : spec.error().describe()));
    auto policy = pol::compiled_policy::compile(*doc, name);
    auto pool = spawn_pool(sys, pc);
    BOOST_REQUIRE_MESSAGE(pool, name << ": " << (pool ? "" : pool.error().describe()));
    for (const auto& op : ops) {
      auto r = exec_code(*pool, code_for(op));
      std::string outcome;
      if (r.error == error_class::policy_kill)
        outcome = "policy_kill";
      else if (r.error == error_class::ok)
        outcome = r.stdout_data.substr(0, r.stdout_data.find('\n'));
      else
        outcome = std::string(to_string(r.error)) + " " + r.detail + r.stderr_data;
      ++outcomes[outcome];
      if (outcome == "ENOENT") {
        ++absent;
        continue;
      }
      const bool did = outcome == "ok";
      const bool refused = outcome == "EACCES" || outcome == "EPERM" || outcome == "EROFS" ||
                           outcome == "policy_kill";
      std::string by;
      const bool allow = explained_allow(*spec, *policy, op, by);
      ++compared;
      if ((did && allow) || (refused && !allow))
        continue;
      ++disagreements;
      BOOST_ERROR(name << ": " << op.perm << ":" << op.path << ": explain says "
                       << (allow ? "allow" : "deny") << " (by " << by << "), the sandbox answered "
                       << outcome);
    }
    caf::anon_send(*pool, shutdown_atom::value);
  }
  std::ostringstream summary;
  for (const auto& [outcome, n] : outcomes)
    summary << " " << outcome << "=" << n;
  BOOST_TEST_MESSAGE("conformance: " << names.size() << " policies, " << ops.size()
                                     << " operations each: " << compared << " compared, "
                                     << absent << " on paths the sandbox lacks, "
                                     << disagreements << " disagreements;" << summary.str());
  BOOST_TEST(disagreements == 0u);
  BOOST_TEST(compared > names.size() * 40);
}

BOOST_AUTO_TEST_SUITE_END()
