// Rootless end to end: the `castellan` CLI run by an unprivileged user
// (nobody) builds the same sandbox as root does, except for what only root
// may do. Here the difference is the per-worker cgroup: without a delegated
// subtree an unprivileged supervisor cannot create one, so the default policy
// refuses to start workers (fail closed, with the reason), and a policy that
// marks cgroups best_effort runs without limits and says so in its report.
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"

namespace fs = std::filesystem;
using castellan::test::process_result;
using castellan::test::run_process;

namespace {

constexpr const char* unprivileged_uid = "65534";

/// A copy of the CLI, the worker, the launcher, the harness and the policies in a
/// world-readable directory: the build tree may sit below a directory the
/// unprivileged user cannot enter.
class staged_install {
public:
  staged_install() {
    char tmpl[] = "/tmp/castellan-rootless-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    root_ = tmpl;
    ::chmod(root_.c_str(), 0755);
    const fs::path build = castellan::test::build_dir();
    fs::create_directories(root_ / "bin");
    fs::copy(build / "bin/castellan", root_ / "bin/castellan");
    fs::copy(build / "bin/castellan-worker", root_ / "bin/castellan-worker");
    fs::copy(build / "bin/castellan-launcher", root_ / "bin/castellan-launcher");
    fs::create_directories(root_ / "share/castellan");
    fs::copy(build / "share/castellan/python", root_ / "share/castellan/python",
             fs::copy_options::recursive);
    fs::copy(fs::path(castellan::test::source_dir()) / "policies",
             root_ / "share/castellan/policies", fs::copy_options::recursive);
    for (auto& entry : fs::recursive_directory_iterator(root_))
      fs::permissions(entry.path(),
                      entry.is_directory() ? fs::perms(0755)
                                           : (entry.path().parent_path().filename() == "bin"
                                                ? fs::perms(0755)
                                                : fs::perms(0644)));
  }
  ~staged_install() {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  fs::path path(const std::string& rel) const { return root_ / rel; }

  /// The default policy with the cgroup layer made best effort, and the
  /// Landlock layer too unless `landlock_strict` (an unprivileged supervisor
  /// cannot set vm.memfd_noexec, which the exec rules need besides Landlock).
  std::string write_best_effort_policy(bool landlock_strict = false) const {
    std::ifstream in(root_ / "share/castellan/policies/default.json");
    auto doc = nlohmann::json::parse(in);
    doc["plugins"]["cgroups"] = {{"enabled", true}, {"best_effort", true}};
    if (!landlock_strict)
      doc["plugins"]["landlock"] = {{"enabled", true}, {"best_effort", true}};
    const auto file = root_ / "share/castellan/policies/rootless.json";
    std::ofstream(file) << doc.dump(2);
    fs::permissions(file, fs::perms(0644));
    return file.string();
  }

  /// test/integration/data/mediated.json on the best-effort default policy
  /// (a layer is best effort only when every merged policy says so): the
  /// supervisor decides calls without root.
  std::string write_mediated_policy() const {
    write_best_effort_policy();
    std::ifstream in(fs::path(castellan::test::source_dir()) /
                     "test/integration/data/mediated.json");
    auto doc = nlohmann::json::parse(in);
    doc["extends"] = {"rootless"};
    doc["plugins"]["cgroups"] = {{"enabled", true}, {"best_effort", true}};
    doc["plugins"]["landlock"] = {{"enabled", true}, {"best_effort", true}};
    const auto file = root_ / "share/castellan/policies/mediated.json";
    std::ofstream(file) << doc.dump(2);
    fs::permissions(file, fs::perms(0644));
    return file.string();
  }

private:
  fs::path root_;
};

/// Runs `args` as the unprivileged user (real, effective and saved ids, no
/// supplementary groups, no capabilities).
process_result as_nobody(std::vector<std::string> args) {
  std::vector<std::string> argv{"/usr/bin/setpriv", std::string("--reuid=") + unprivileged_uid,
                                std::string("--regid=") + unprivileged_uid, "--clear-groups",
                                "--inh-caps=-all", "--"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv);
}

/// Ends the test as skipped when this kernel does not let an unprivileged
/// user create a user namespace (the one thing rootless mode needs).
void require_unprivileged_user_namespaces() {
  if (::geteuid() != 0) {
    std::cout << "SKIP: the test needs root to switch to an unprivileged user" << std::endl;
    std::exit(77);
  }
  auto r = as_nobody({"/usr/bin/unshare", "--user", "--map-current-user", "/bin/true"});
  if (r.exit_code != 0) {
    std::cout << "SKIP: unprivileged user namespaces are disabled here: " << r.err << std::endl;
    std::exit(77);
  }
}

} // namespace

BOOST_AUTO_TEST_SUITE(rootless)

BOOST_AUTO_TEST_CASE(the_default_policy_refuses_to_run_without_its_cgroup) {
  require_unprivileged_user_namespaces();
  staged_install inst;
  auto r = as_nobody({inst.path("bin/castellan").string(), "exec", "--json", "print(1)"});
  BOOST_TEST(r.exit_code != 0);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["error_class"] == "worker_lost");
  const std::string detail = j["detail"];
  BOOST_TEST(detail.find("cgroup") != std::string::npos, detail);
  BOOST_TEST(j["stdout"] == "");
}

/// Runs the best-effort policy's probe as nobody, with `extra` flags, and
/// checks every layer but the cgroup in force.
void check_rootless_layers(const std::vector<std::string>& extra) {
  require_unprivileged_user_namespaces();
  staged_install inst;
  const std::string policy = inst.write_best_effort_policy();
  const std::string code = R"PY(
import json, os
status = dict(line.split(":\t", 1) for line in open("/proc/self/status").read().splitlines()
              if ":\t" in line)
try:
    open("/usr/lib/castellan-probe", "w")
    wrote_usr = True
except OSError:
    wrote_usr = False
with open("/tmp/ok", "w") as f:
    f.write("x")
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "uid": os.getuid(),
                  "seccomp": status["Seccomp"].strip(), "nnp": status["NoNewPrivs"].strip(),
                  "capeff": status["CapEff"].strip(), "wrote_usr": wrote_usr,
                  "hostname": os.uname().nodename}))
)PY";
  std::vector<std::string> argv{inst.path("bin/castellan").string(), "exec", "--json",
                                "--policy", policy};
  argv.insert(argv.end(), extra.begin(), extra.end());
  argv.push_back(code);
  auto r = as_nobody(argv);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["error_class"] == "ok");
  auto seen = nlohmann::json::parse(j["stdout"].get<std::string>());
  // The default (isolated) mode: the exec's own process, the zygote's child.
  BOOST_TEST(seen["pid"] == 4);
  BOOST_TEST(seen["ppid"] == 3);
  BOOST_TEST(seen["uid"] != 0);
  BOOST_TEST(seen["seccomp"] == "2");
  BOOST_TEST(seen["nnp"] == "1");
  BOOST_TEST(seen["capeff"] == "0000000000000000");
  BOOST_TEST(seen["wrote_usr"] == false);
  BOOST_TEST(seen["hostname"] == "castellan");

  const auto& report = j["enforcement"];
  BOOST_TEST_MESSAGE("rootless enforcement: " << report.dump());
  for (const char* ns : {"user", "pid", "mount", "net", "ipc", "uts", "cgroup"}) {
    const auto& in_force = report["namespaces"]["in_force"];
    BOOST_TEST((std::find(in_force.begin(), in_force.end(), ns) != in_force.end()), ns);
  }
  BOOST_TEST(report["cgroup"]["in_force"].is_null());
  BOOST_TEST(report["cgroup"]["best_effort"] == true);
  BOOST_TEST(!report["cgroup"]["unavailable"].get<std::string>().empty());
  BOOST_TEST(report["landlock"]["enforced"] == true);
  // Only a supervisor with the host's root uid can write the sysctl.
  BOOST_TEST(report["root"]["memfd_noexec"] != 2);
  BOOST_TEST(report["seccomp"]["enforced"] == true);
  BOOST_TEST(report["seccomp"]["no_new_privs"] == true);
}

BOOST_AUTO_TEST_CASE(exec_rules_refuse_to_run_without_memfd_noexec) {
  // An exec deny needs vm.memfd_noexec = 2, which no unprivileged process
  // can set: with Landlock strict, the worker ends before Python runs and
  // PID 1's status pipe names why.
  require_unprivileged_user_namespaces();
  staged_install inst;
  const std::string policy = inst.write_best_effort_policy(true);
  auto r = as_nobody({inst.path("bin/castellan").string(), "exec", "--json", "--policy", policy,
                      "print(1)"});
  BOOST_TEST(r.exit_code != 0);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["error_class"] == "worker_lost");
  const std::string detail = j["detail"];
  BOOST_TEST(detail.find("exited with 10 (sandbox: executable memfds could not be refused "
                         "(vm.memfd_noexec)) before it was ready") != std::string::npos,
             detail);
  BOOST_TEST(j["stdout"] == "");
}

BOOST_AUTO_TEST_CASE(best_effort_cgroups_run_every_other_layer_and_say_so) {
  check_rootless_layers({});
}

BOOST_AUTO_TEST_CASE(a_warm_start_without_root_builds_the_same_sandbox) {
  // The launcher clones as the unprivileged user: it owns the new user
  // namespace, writes its one-line id maps and makes the worker its
  // parent's child, all without privilege.
  check_rootless_layers({"--warm-start"});
}

BOOST_AUTO_TEST_CASE(decided_calls_are_served_without_root) {
  // The listener is taken with pidfd_getfd and calls are performed on the
  // worker's behalf by a supervisor that owns the worker's user namespace
  // and nothing more.
  require_unprivileged_user_namespaces();
  staged_install inst;
  const std::string policy = inst.write_mediated_policy();
  const std::string code = R"PY(
import os, socket
os.makedirs("/tmp/keep", exist_ok=True)
open("/tmp/keep/f", "w").close()
try:
    os.unlink("/tmp/keep/f")
except PermissionError as e:
    print(e)
os.mkdir("/tmp/made")
print("owner", os.stat("/tmp/made").st_uid)
server = socket.socket(socket.AF_UNIX)
server.bind("/tmp/s")
server.listen()
client = socket.socket(socket.AF_UNIX)
client.connect("/tmp/s")
print("connected", server.getsockname())
cookie = lambda s: s.getsockopt(socket.SOL_SOCKET, 71, 8)  # SO_NETNS_COOKIE
print("netns", "sandbox" if cookie(client) == cookie(socket.socket(socket.AF_UNIX)) else "other")
)PY";
  auto r =
      as_nobody({inst.path("bin/castellan").string(), "exec", "--json", "--policy", policy, code});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  auto j = nlohmann::json::parse(r.out);
  const std::string out = j["stdout"];
  BOOST_TEST(out.find("Permission denied by policy 'mediated' (rule /fs/rules/14: unlink "
                      "/tmp/keep/f)") != std::string::npos,
             out);
  BOOST_TEST(out.find("owner 1000\n") != std::string::npos, out);
  // The socket the supervisor made for the connect is the sandbox's, made
  // by a child that entered the worker's namespaces (an unprivileged
  // supervisor cannot setns into them itself).
  BOOST_TEST(out.find("netns sandbox\n") != std::string::npos, out);
  BOOST_TEST(out.find("connected /tmp/s\n") != std::string::npos, out);
  BOOST_REQUIRE(j["events"].size() == 1u);
  BOOST_TEST(j["events"][0]["syscall"] == "unlink");
}

BOOST_AUTO_TEST_SUITE_END()
