// Escape probes: each probes/NAME.py tries one way out of the sandbox and
// prints "verdict: X"; it runs through the real pool under
// policies/strict.json, and the test checks the exact outcome (the errno
// name the kernel answered, or what the probe saw). strict.json decides no
// system call (no notify filter), so the probes against the supervisor
// acting for a worker (deputy_*) run under mediating.json in fork mode.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/mediation/notify_mapping.hpp"
#include "platform/linux/landlock.hpp"
#include "actors/session/workspace_store.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/sanitizers.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;

namespace {

/// A pool of `size` workers under policies/strict.json, in `mode`.
struct strict_pool : test::actor_system_fixture {
  pool_actor pool;

  explicit strict_pool(exec_mode mode = exec_mode::shared, uint32_t size = 2,
                       uint32_t recycle_after = 1,
                       const std::string& policy_file = "/policies/strict.json",
                       const std::string& workspace = "") {
    auto pc = test_pool(size);
    const std::string dir = test::source_dir() + "/policies";
    auto doc = policy::load_policy(test::source_dir() + policy_file, dir);
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : doc.to_failure().describe()));
    auto ok = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    pc.mode = mode;
    if (pc.warm_start && test::address_sanitizer) {
      // Warm workers run Python inside the instrumented launcher: ASan's
      // allocator (its quarantine alone keeps up to 256 MiB) is not what a
      // policy's memory limit is sized for.
      BOOST_TEST_MESSAGE("AddressSanitizer build: warm workers get a 512 MiB memory limit");
      pc.limits.memory_bytes = 512ull << 20;
    }
    pc.recycle_after = recycle_after; // 1: every probe starts in a fresh worker
    pc.sandbox.workspace_source = workspace;
    pc.worker_stderr = std::getenv("CASTELLAN_WORKER_STDERR") != nullptr;
    auto p = spawn_pool(sys, pc);
    BOOST_REQUIRE_MESSAGE(p, (p ? "" : p.error().describe()));
    pool = *p;
  }
  ~strict_pool() { caf::anon_send(pool, shutdown_atom::value); }

  /// Runs probes/NAME.py after probe_prelude.py (and `preamble`); the
  /// result, and its verdict in `verdict`.
  exec_result probe(const std::string& name, std::string& verdict,
                    const std::string& preamble = "", exec_request base = {}) {
    const std::string dir = test::source_dir() + "/test/escapes/";
    std::ifstream prelude(dir + "probe_prelude.py");
    std::ifstream in(dir + "probes/" + name + ".py");
    BOOST_REQUIRE_MESSAGE(prelude, "probe_prelude.py not found");
    BOOST_REQUIRE_MESSAGE(in, "probe " << name << " not found");
    std::ostringstream code;
    code << prelude.rdbuf() << preamble << in.rdbuf();
    exec_request req = std::move(base);
    req.code = code.str();
    auto r = exec(pool, std::move(req));
    verdict.clear();
    const auto pos = r.stdout_data.rfind("verdict: ");
    if (pos != std::string::npos) {
      const auto end = r.stdout_data.find('\n', pos);
      verdict = r.stdout_data.substr(pos + 9, end == std::string::npos ? end : end - pos - 9);
    }
    BOOST_TEST_MESSAGE(name << ": " << to_string(r.error) << " verdict '" << verdict << "'"
                            << (r.stderr_data.empty() ? "" : " stderr: " + r.stderr_data)
                            << (r.exception.type.empty() ? "" : " exception: " + r.exception.type + ": " + r.exception.message));
    return r;
  }

  /// The probe ran to the end and its verdict is one of `expected`.
  void expect(const std::string& name, const std::set<std::string>& expected) {
    std::string verdict;
    auto r = probe(name, verdict);
    BOOST_TEST((r.error == error_class::ok), name << ": " << to_string(r.error) << " "
                                                  << r.detail << r.stderr_data);
    BOOST_TEST(expected.count(verdict) == 1u,
               name << ": verdict '" << verdict << "', expected " << *expected.begin());
  }
};

/// One fork-mode worker (pool of 1, never recycled), so that consecutive
/// probes run on the same worker: one exec's traces are looked for by the
/// next, forked from the same zygote.
struct fork_pool : strict_pool {
  explicit fork_pool(const std::string& policy_file = "/policies/strict.json")
    : strict_pool(exec_mode::isolated, 1, 0, policy_file) {}

  /// Runs probes/NAME.py twice on the one worker, with PHASE = 1 (it plants
  /// something, or reaches for the processes that serve the next exec) and
  /// then PHASE = 2 (it looks); the second's verdict must be one of
  /// `expected`, and both must have run on the same worker.
  void expect_sequence(const std::string& name, const std::set<std::string>& expected,
                       const std::string& preamble = "", exec_request first_request = {}) {
    std::string first, second;
    auto r1 = probe(name, first, preamble + "PHASE = 1\n", std::move(first_request));
    BOOST_TEST_MESSAGE(name << " (first exec): " << r1.stdout_data << r1.stderr_data);
    auto r2 = probe(name, second, preamble + "PHASE = 2\n");
    BOOST_TEST((r2.error == error_class::ok), name << ": " << to_string(r2.error) << " "
                                                   << r2.detail << r2.stderr_data);
    BOOST_TEST(r1.worker_id == r2.worker_id,
               name << ": the second exec ran on worker " << r2.worker_id << ", the first on "
                    << r1.worker_id << " (the worker was replaced in between)");
    BOOST_TEST(expected.count(second) == 1u,
               name << ": verdict '" << second << "', expected " << *expected.begin());
  }

  /// Like expect_sequence, for what cannot be put back: the first exec's
  /// worker must not serve the second.
  void expect_replaced(const std::string& name, const std::set<std::string>& expected,
                       const std::string& preamble = "") {
    std::string first, second;
    auto r1 = probe(name, first, preamble + "PHASE = 1\n");
    BOOST_TEST(first == "planted", name << " (first exec): " << r1.stdout_data << r1.stderr_data);
    auto r2 = probe(name, second, preamble + "PHASE = 2\n");
    BOOST_TEST((r2.error == error_class::ok), name << ": " << to_string(r2.error) << " "
                                                   << r2.detail << r2.stderr_data);
    BOOST_TEST(r1.worker_id != r2.worker_id,
               name << ": worker " << r1.worker_id << " served the second exec too");
    BOOST_TEST(expected.count(second) == 1u,
               name << ": verdict '" << second << "', expected " << *expected.begin());
  }
};

/// A policy that turns the notify filter on (opens and connects to pathname
/// sockets decided), in fork mode: PID 2 is the zygote.
struct mediating_pool : strict_pool {
  mediating_pool() : strict_pool(exec_mode::isolated, 2, 1, "/test/escapes/mediating.json") {}
};

/// Datagrams on the sandbox's own loopback, decided by the supervisor.
struct loopback_udp_pool : strict_pool {
  loopback_udp_pool()
      : strict_pool(exec_mode::shared, 1, 1, "/test/escapes/loopback_udp.json") {}
};

/// An 8 MiB workspace of a store in a temporary directory, opened before
/// the pool that binds it starts; nothing of it stays mounted afterwards.
/// Empty `path` (and `lacking` says why) where the kernel has no loop
/// devices or no ext4.
struct workspace_holder {
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  std::shared_ptr<workspace_store> store;
  workspace_lease lease;
  std::string path;
  std::string lacking;

  workspace_holder() {
    if (auto why = test::workspace_kernel_lacks()) {
      lacking = *why;
      return;
    }
    auto owner = sandbox_owner();
    BOOST_REQUIRE(owner);
    auto s = workspace_store::open({tmp.file("workspaces"), *owner});
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    store = *s;
    BOOST_REQUIRE(store->create("probe", 8ull << 20));
    auto l = store->open_workspace("probe");
    BOOST_REQUIRE(l);
    lease = std::move(*l);
    path = lease.host_path();
  }
};

/// default.json's pool with the workspace bound at /workspace: probes
/// against the one writable place a sandbox and the host share. (strict.json
/// denies every write by a rule on "/", the workspace's included.)
struct workspace_pool : workspace_holder, strict_pool {
  workspace_pool()
      : strict_pool(exec_mode::shared, 1, 1, "/policies/default.json", workspace_holder::path) {}

  bool skipped() {
    if (!lacking.empty())
      test::skip(lacking);
    return !lacking.empty();
  }
};

/// Landlock TCP rules (ABI 4) answer connect() before routing does.
std::string denied_connect(const char* without_landlock) {
  return platform::landlock_abi() >= 4 ? "EACCES" : without_landlock;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(fs_probes, strict_pool)

BOOST_AUTO_TEST_CASE(read_shadow) { expect("read_shadow", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(etc_secrets) { expect("etc_secrets", {"nothing"}); }
BOOST_AUTO_TEST_CASE(write_usr) { expect("write_usr", {"EROFS"}); }
// Existing files: the permission check (mode 0444 / owned by an unmapped
// host user) answers before the read-only mount does.
BOOST_AUTO_TEST_CASE(write_etc_passwd) { expect("write_etc_passwd", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(write_harness) { expect("write_harness", {"EACCES"}); }
// strict.json refuses to make the link (its /tmp is read-only).
BOOST_AUTO_TEST_CASE(symlink_escape) { expect("symlink_escape", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(hardlink_escape) { expect("hardlink_escape", {"EXDEV"}); }
BOOST_AUTO_TEST_CASE(dotdot_escape) { expect("dotdot_escape", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(proc1_root) { expect("proc1_root", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(dev_mem) { expect("dev_mem", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(sys_write) { expect("sys_write", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(other_shm) { expect("other_shm", {"empty"}); }
// A read-only bind: the host's node keeps its times; writing still works.
BOOST_AUTO_TEST_CASE(dev_node_times) { expect("dev_node_times", {"EROFS"}); }

BOOST_AUTO_TEST_SUITE_END()

// The workspace is written by the sandbox and read by the host: it holds
// data, never programs, devices or a way out. Landlock lets default.json's
// code write there (a base grant without execute or device nodes); the
// mount options, the user namespace and the seccomp filter refuse the rest.
BOOST_FIXTURE_TEST_SUITE(workspace_probes, workspace_pool)

#define WORKSPACE_PROBE(name, ...)                                                              \
  BOOST_AUTO_TEST_CASE(name) {                                                                   \
    if (!skipped())                                                                              \
      expect(#name, __VA_ARGS__);                                                                \
  }

// Neither a program nor a setuid one runs from there: Landlock grants no
// execute on the workspace, and the bind is noexec.
WORKSPACE_PROBE(workspace_exec, {"EACCES"})
WORKSPACE_PROBE(workspace_setuid, {"EACCES"})
// Landlock grants no make_char there (nor would CAP_MKNOD outside the user
// namespace, and the mount is nodev).
WORKSPACE_PROBE(workspace_mknod, {"EACCES"})
// mount and umount2 are refused by the anti-escape filter.
WORKSPACE_PROBE(workspace_remount, {"EPERM"})
WORKSPACE_PROBE(workspace_umount, {"EPERM"})
// Another file system: no link reaches a file outside it.
WORKSPACE_PROBE(workspace_hardlink, {"EXDEV"})
// FS_IMMUTABLE_FL needs CAP_LINUX_IMMUTABLE in the initial user namespace.
WORKSPACE_PROBE(workspace_immutable, {"EPERM"})
// lost+found is root's on the host: unmapped, mode 0700.
WORKSPACE_PROBE(workspace_lost_found, {"EACCES"})
// The quota holds for a reservation as for a write.
WORKSPACE_PROBE(workspace_fallocate, {"ENOSPC"})

#undef WORKSPACE_PROBE

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(kernel_probes, strict_pool)

BOOST_AUTO_TEST_CASE(ptrace_pid1) { expect("ptrace_pid1", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(mount_tmpfs) { expect("mount_tmpfs", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(unshare_user) { expect("unshare_user", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(setns) { expect("setns", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(chroot) { expect("chroot", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(bpf) { expect("bpf", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(keyctl) { expect("keyctl", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(io_uring_bypass) { expect("io_uring_bypass", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(perf_event) { expect("perf_event", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(init_module) { expect("init_module", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(userfaultfd) { expect("userfaultfd", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(open_by_handle) { expect("open_by_handle", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(sethostname) { expect("sethostname", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(inotify_watch) { expect("inotify_watch", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(dnotify_watch) { expect("dnotify_watch", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(page_cache_probe) { expect("page_cache_probe", {"ENOTSUP"}); }
// uid 0 is not mapped in the worker's user namespace: there is no root to
// become (EINVAL), let alone the host's.
BOOST_AUTO_TEST_CASE(setuid_root) { expect("setuid_root", {"EINVAL"}); }

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(net_probes, strict_pool)

BOOST_AUTO_TEST_CASE(raw_socket) { expect("raw_socket", {"EPERM"}); }
BOOST_AUTO_TEST_CASE(netlink_route) { expect("netlink_route", {"lo"}); }
BOOST_AUTO_TEST_CASE(cloud_metadata) {
  expect("cloud_metadata", {denied_connect("ENETUNREACH")});
}
BOOST_AUTO_TEST_CASE(host_loopback) {
  expect("host_loopback", {denied_connect("ECONNREFUSED")});
}
BOOST_AUTO_TEST_CASE(udp_out) { expect("udp_out", {"ENETUNREACH"}); }
BOOST_FIXTURE_TEST_CASE(udp_loopback_race, loopback_udp_pool) {
  expect("udp_loopback_race", {"none arrived"});
}
// The family in the copied address is the caller's to change: the socket's
// own domain decides, and a family the kernel would read again as AF_INET
// (AF_UNSPEC) is refused.
BOOST_FIXTURE_TEST_CASE(udp_family_flip, loopback_udp_pool) {
  expect("udp_family_flip", {"none arrived"});
}
// A mixed sendmmsg: nothing is sent by the supervisor to the abstract name.
BOOST_FIXTURE_TEST_CASE(unix_mmsg_mixed, loopback_udp_pool) {
  expect("unix_mmsg_mixed", {"EINVAL"});
}
BOOST_FIXTURE_TEST_CASE(udp_fd_swap, loopback_udp_pool) {
  expect("udp_fd_swap", {"no TCP socket bound"});
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(process_probes, strict_pool)

BOOST_AUTO_TEST_CASE(kill_all) { expect("kill_all", {"ESRCH"}); }
BOOST_AUTO_TEST_CASE(kill_pid1) {
  expect("kill_pid1", {platform::landlock_abi() >= 6 ? "EPERM" : "ok"});
}
BOOST_AUTO_TEST_CASE(exec_shell) {
  expect("exec_shell", {platform::landlock_abi() > 0 ? "EACCES" : "ok"});
}

// Every way to start a program other than naming it holds the exec rules
// (docs/security.md, "Exec rules"). Each probe runs /usr/bin/dash, which
// strict.json does not allow, from a child of the harness. (A memfd is
// refused by vm.memfd_noexec = 2; without it, strict.json's workers would
// not start at all.)
BOOST_AUTO_TEST_CASE(memfd_exec) { expect("memfd_exec", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(proc_fd_exec) { expect("proc_fd_exec", {"EACCES EACCES"}); }
BOOST_AUTO_TEST_CASE(execveat_exec) { expect("execveat_exec", {"EACCES EACCES"}); }
BOOST_AUTO_TEST_CASE(writable_exec) { expect("writable_exec", {"EACCES EACCES EACCES"}); }
BOOST_AUTO_TEST_CASE(shebang_interpreter) {
  expect("shebang_interpreter", {"EACCES EACCES"});
}
// Not contained, and said so in docs/security.md ("Exec rules"): the loader
// run as a program runs what any code could map executable in-process.
BOOST_AUTO_TEST_CASE(loader_exec) { expect("loader_exec", {"ok"}); }

BOOST_AUTO_TEST_CASE(fork_bomb) {
  // strict.json: 16 tasks. The bomb stops at EAGAIN; the next probe runs.
  expect("fork_bomb", {"EAGAIN"});
  expect("read_shadow", {"ENOENT"});
}

BOOST_AUTO_TEST_CASE(memory_bomb) {
  // strict.json: 128 MiB. The cgroup's OOM killer ends the worker; the exec
  // is answered `oom` and the pool serves the next one.
  std::string verdict;
  auto r = probe("memory_bomb", verdict);
  BOOST_TEST((r.error == error_class::oom), to_string(r.error) << " " << r.detail);
  BOOST_TEST(verdict.empty());
  expect("read_shadow", {"ENOENT"});
}

BOOST_AUTO_TEST_SUITE_END()

// Fork mode: what one exec can reach of the processes that serve the next
// (the harness, the zygote), and what it leaves for the next. Each runs on a
// pool of one fork-mode worker that is never recycled.
BOOST_FIXTURE_TEST_SUITE(fork_probes, fork_pool)

// Both are not dumpable and outside the exec's Landlock domain: procfs
// (hidepid=invisible) does not even show them.
BOOST_AUTO_TEST_CASE(fork_proc_harness) { expect("fork_proc_harness", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(fork_proc_zygote) { expect("fork_proc_zygote", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(fork_ring_memfd) { expect("fork_ring_memfd", {"ENOENT"}); }
BOOST_AUTO_TEST_CASE(fork_signal_zygote) {
  expect("fork_signal_zygote", {platform::landlock_abi() >= 6 ? "EPERM" : "ok"});
}
BOOST_AUTO_TEST_CASE(fork_kill_all) {
  expect("fork_kill_all", {platform::landlock_abi() >= 6 ? "zygote alive" : "zygote killed"});
}
BOOST_AUTO_TEST_CASE(fork_zygote_pipe) { expect_sequence("fork_zygote_pipe", {"own"}); }
BOOST_AUTO_TEST_CASE(fork_memory_secret) {
  // The first exec's environment and stdin are secrets too: the zygote
  // relays them (the SETUP frame) and must keep no copy.
  exec_request first;
  first.env = {"CASTELLAN_PROBE=castellan-env-" "a61f93d0c4"};
  first.stdin_data = "castellan-stdin-" "2c7be95140";
  first.cwd = "/usr"; // the worker's own is /tmp
  expect_sequence("fork_memory_secret", {"clean"}, "", std::move(first));
}
BOOST_AUTO_TEST_CASE(fork_tmp_files) { expect_sequence("fork_tmp_files", {"empty"}); }
BOOST_AUTO_TEST_CASE(fork_tmp_attrs) { expect_sequence("fork_tmp_attrs", {"clean"}); }
BOOST_AUTO_TEST_CASE(fork_sysv_ipc) { expect_sequence("fork_sysv_ipc", {"empty"}); }
BOOST_AUTO_TEST_CASE(fork_stdio_flags) { expect_sequence("fork_stdio_flags", {"blocking"}); }
BOOST_AUTO_TEST_CASE(fork_mqueue) { expect("fork_mqueue", {"EACCES"}); }
// Limits and scheduling of the processes that serve the next exec (and of
// PID 1, the process group, the user): the same uid is all these calls
// check, so the seccomp filter keeps them to the caller itself.
BOOST_AUTO_TEST_CASE(fork_sched_reach) { expect("fork_sched_reach", {"refused"}); }
BOOST_AUTO_TEST_CASE(fork_zygote_limits) { expect_sequence("fork_zygote_limits", {"unchanged"}); }
BOOST_AUTO_TEST_CASE(fork_shared_locks) { expect_sequence("fork_shared_locks", {"none"}); }

/// A fork-mode pool whose policy has opens the supervisor decides (and
/// performs for the worker): test/integration/data/mediated.json.
struct mediated_fork_pool : fork_pool {
  mediated_fork_pool() : fork_pool("/test/integration/data/mediated.json") {}
};

BOOST_FIXTURE_TEST_CASE(fork_mediated_proc, mediated_fork_pool) {
  expect("fork_mediated_proc", {"EACCES"});
}
BOOST_FIXTURE_TEST_CASE(fork_control_socket, mediated_fork_pool) {
  expect_sequence("fork_control_socket", {"restored"});
}
BOOST_FIXTURE_TEST_CASE(fork_control_options, mediated_fork_pool) {
  expect_sequence("fork_control_options", {"clean"});
}

/// An isolated-mode pool under policies/default.json, whose /tmp and
/// /dev/shm are writable.
struct default_fork_pool : fork_pool {
  default_fork_pool() : fork_pool("/policies/default.json") {}
};

// Descriptions and inodes every exec shares: times, modes, hints, flags,
// owners, signals are put back after each exec.
BOOST_FIXTURE_TEST_CASE(fork_shared_state, default_fork_pool) {
  expect_sequence("fork_shared_state", {"clean"});
}

BOOST_FIXTURE_TEST_CASE(fork_memory_secret_files, default_fork_pool) {
  // fork_memory_secret, with files: the first exec's files_in and the
  // file read back for it (files_out) are secrets too. Its own process
  // writes the one, the zygote reads the other; neither may keep a copy.
  // (Under default.json: strict.json's /tmp is read-only.)
  exec_request first;
  first.files_in = {exec_file_in{"/tmp/probe-in", "castellan-file-in-" "7e03b1c95d", 0600}};
  first.files_out = {"/tmp/probe-out"};
  std::string verdict;
  auto r1 = probe("fork_memory_secret", verdict, "PHASE = 1\n", first);
  BOOST_TEST(r1.stdout_data.find("castellan-file-in-" "7e03b1c95d") != std::string::npos,
             r1.stdout_data);
  BOOST_REQUIRE(r1.files.size() == 1u);
  BOOST_TEST(r1.files[0].content == "castellan-file-out-" "e4a8c2106f");
  auto r2 = probe("fork_memory_secret", verdict, "PHASE = 2\n");
  BOOST_TEST(r1.worker_id == r2.worker_id);
  BOOST_TEST(verdict == "clean");
}
BOOST_FIXTURE_TEST_CASE(fork_control_filter, mediated_fork_pool) {
  expect_sequence("fork_control_filter", {"clean"}, "LOCK = False\n");
}
BOOST_FIXTURE_TEST_CASE(fork_control_filter_locked, mediated_fork_pool) {
  expect_replaced("fork_control_filter", {"clean"}, "LOCK = True\n");
}
// The worker's sending side of the control socket is shut once the
// supervisor has the listener: nothing can be parked there.
BOOST_FIXTURE_TEST_CASE(fork_control_park, mediated_fork_pool) {
  expect("fork_control_park", {"EPIPE"});
}

BOOST_AUTO_TEST_SUITE_END()

/// What an exec can leave at a files_out path, in both modes, under
/// policies/default.json: the probe plants, the worker reads the files
/// back after it, and the result says what it found.
struct files_pools : test::actor_system_fixture {
  /// The probe run on a pool of one worker in `mode`, with `files_out`
  /// (relative to `cwd`).
  exec_result run(const std::string& name, exec_mode mode, std::vector<std::string> files_out,
                  const std::string& cwd = "/tmp") {
    // default.json: /tmp is writable (strict.json makes it read-only).
    std::unique_ptr<strict_pool> p =
      mode == exec_mode::isolated
        ? std::make_unique<fork_pool>("/policies/default.json")
        : std::make_unique<strict_pool>(exec_mode::shared, 1, 0, "/policies/default.json");
    exec_request req;
    req.files_out = std::move(files_out);
    req.cwd = cwd;
    req.timeout_ms = 20000;
    std::string verdict;
    auto r = p->probe(name, verdict,
                      std::string("ISOLATED = ") +
                        (mode == exec_mode::isolated ? "True" : "False") + "\n",
                      std::move(req));
    // A reader blocked on a FIFO would hold the RESULT back past the
    // deadline: the exec would end as a timeout.
    BOOST_TEST((r.error == error_class::ok), name << ": " << to_string(r.error) << " "
                                                  << r.detail << r.stderr_data
                                                  << r.exception.message);
    BOOST_TEST(verdict != "", name << ": " << r.stdout_data << r.stderr_data);
    return r;
  }
};

BOOST_FIXTURE_TEST_SUITE(files_probes, files_pools)

BOOST_AUTO_TEST_CASE(files_swap_race) {
  for (const auto mode : {exec_mode::shared, exec_mode::isolated}) {
    // The swapping goes on while the files are read: several reads, each
    // one of the three things or a moment without it, never the target.
    for (int round = 0; round < 3; ++round) {
      auto r = run("files_swap_race", mode, {"out", "out", "out", "out"});
      BOOST_REQUIRE(r.files.size() == 4u);
      for (const auto& f : r.files) {
        BOOST_TEST((f.error == "not_regular" || f.error == "missing" ||
                    (f.error.empty() && f.content == "regular")),
                   f.path << ": " << f.error << " " << f.message << " " << f.content);
        BOOST_TEST(f.content.find("root:") == std::string::npos);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(files_proc_self) {
  for (const auto mode : {exec_mode::shared, exec_mode::isolated}) {
    auto r = run("files_proc_self", mode,
                 {"self/environ", "self/mem", "self/maps", "thread-self/environ", "1/environ",
                  "2/environ", "3/environ"},
                 "/proc");
    BOOST_REQUIRE(r.files.size() == 7u);
    // Hidden (hidepid), not ours to read, or refused: never content.
    for (const auto& f : r.files)
      BOOST_TEST((f.error == "not_regular" || f.error == "missing" || f.error == "unreadable"),
                 f.path << ": " << f.error << " " << f.content.size() << " bytes");
    BOOST_TEST(r.files[0].error == "not_regular"); // /proc/self: a symlink
    BOOST_TEST(r.files[3].error == "not_regular"); // /proc/thread-self: a symlink
    if (mode == exec_mode::shared && !test_pool().warm_start)
      // The harness (PID 2) runs the code itself, so it sees its own
      // /proc/2: a regular file there, refused for being on procfs. (A
      // worker cloned warm is not dumpable: its /proc/2 is root's.)
      BOOST_TEST(r.files[5].error == "not_regular");
  }
}

BOOST_AUTO_TEST_CASE(files_sparse_fifo) {
  for (const auto mode : {exec_mode::shared, exec_mode::isolated}) {
    auto r = run("files_sparse_fifo", mode, {"huge", "fifo", "sock", "zero"});
    BOOST_REQUIRE(r.files.size() == 4u);
    BOOST_TEST(r.files[0].error == "too_large");
    BOOST_TEST(r.files[0].size == uint64_t{1} << 40);
    BOOST_TEST(r.files[1].error == "not_regular");
    BOOST_TEST(r.files[2].error == "not_regular");
    BOOST_TEST(r.files[3].error == "not_regular");
  }
}

BOOST_AUTO_TEST_SUITE_END()


// The supervisor acting for a worker (decided calls) has no privilege the
// worker lacks: no capability (CAP_SYS_PTRACE...), no other process's /proc
// entry, the worker's Landlock rights, the worker's network namespace.
BOOST_FIXTURE_TEST_SUITE(deputy_probes, mediating_pool)

BOOST_AUTO_TEST_CASE(mediation_is_on) {
  // Otherwise every probe below would test the kernel, not the supervisor.
  const std::string dir = test::source_dir() + "/policies";
  auto doc = policy::load_policy(test::source_dir() + "/test/escapes/mediating.json", dir);
  BOOST_REQUIRE(doc);
  const auto spec = notify_spec_for(*doc);
  for (const char* call : {"openat", "connect"})
    BOOST_TEST(std::count(spec.syscalls.begin(), spec.syscalls.end(), call) == 1, call);
  BOOST_TEST(!spec.open_writes_only);
}
BOOST_AUTO_TEST_CASE(deputy_proc1_maps) { expect("deputy_proc1_maps", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(deputy_proc1_cmdline) { expect("deputy_proc1_cmdline", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(deputy_zygote_mem) { expect("deputy_zygote_mem", {"EACCES"}); }
// Refused by the check on the object the symlink led to, or — where PID 1
// is not dumpable and the procfs hides it from an opener without
// CAP_SYS_PTRACE (workers started warm) — by the lookup itself.
BOOST_AUTO_TEST_CASE(deputy_proc_symlink) {
  expect("deputy_proc_symlink", {"EACCES", "ENOENT"});
}
BOOST_AUTO_TEST_CASE(deputy_proc_dotdot) { expect("deputy_proc_dotdot", {"EACCES"}); }
BOOST_AUTO_TEST_CASE(deputy_proc_self) { expect("deputy_proc_self", {"caller"}); }
BOOST_AUTO_TEST_CASE(deputy_unix_netns) { expect("deputy_unix_netns", {"sandbox netns"}); }
BOOST_AUTO_TEST_CASE(deputy_landlock_root) {
  expect("deputy_landlock_root", {platform::landlock_abi() > 0 ? "EACCES" : "ok"});
}
BOOST_AUTO_TEST_CASE(deputy_landlock_dev) {
  expect("deputy_landlock_dev", {platform::landlock_abi() > 0 ? "EACCES" : "ok"});
}

BOOST_AUTO_TEST_SUITE_END()
