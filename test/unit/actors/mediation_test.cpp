// Decided system calls end to end: a real pool under
// test/integration/data/mediated.json (the default policy plus carve-outs
// only the supervisor can decide), Python code and a native program
// (test/support/notify_probe.c) in command mode.

#include <boost/test/unit_test.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/mediation/syscall_mediator.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

std::string probe_binary() {
  return test::build_dir() + "/test-bin/notify_probe";
}

const policy_event* find_event(const exec_result& r, const std::string& kind,
                               const std::string& target) {
  auto it = std::find_if(r.events.begin(), r.events.end(), [&](const policy_event& e) {
    return to_string(e.kind) == kind && e.target == target;
  });
  return it == r.events.end() ? nullptr : &*it;
}

/// Whether `out` has the line `line`.
bool has_line(const std::string& out, const std::string& line) {
  std::size_t at = 0;
  while (at <= out.size()) {
    const auto end = out.find('\n', at);
    if (out.compare(at, (end == std::string::npos ? out.size() : end) - at, line) == 0)
      return true;
    if (end == std::string::npos)
      break;
    at = end + 1;
  }
  return false;
}

/// Checks every expected "step: outcome" line of a probe's output.
void expect_lines(const exec_result& r, std::initializer_list<const char*> lines) {
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  for (const char* line : lines)
    BOOST_TEST(has_line(r.stdout_data, line), "missing '" << line << "' in:\n" << r.stdout_data);
  BOOST_TEST(has_line(r.stdout_data, "after"), r.stdout_data);
}

/// Checks that `r` has a `kind` event for `target` from `syscall` and `rule`.
void expect_event(const exec_result& r, const std::string& kind, const std::string& syscall,
                  const std::string& target, const std::string& rule) {
  auto it = std::find_if(r.events.begin(), r.events.end(), [&](const policy_event& e) {
    return to_string(e.kind) == kind && e.target == target && e.syscall == syscall;
  });
  BOOST_REQUIRE_MESSAGE(it != r.events.end(),
                        "no " << kind << " event of " << syscall << " for " << target);
  const policy_event* e = &*it;
  BOOST_TEST(e->rule == rule);
  BOOST_TEST(e->pid > 0);
  BOOST_TEST(e->timestamp_ns > 0);
}

/// A shell script next to the native probe (its directory is bound).
std::string shebang_script() { return test::build_dir() + "/test-bin/castellan-shebang.sh"; }

struct mediated_pool : test::actor_system_fixture {
  pool_actor pool;

  mediated_pool() {
    auto pc = test_pool(1);
    const std::string dir = test::source_dir() + "/policies";
    auto doc =
        policy::load_policy(test::source_dir() + "/test/integration/data/mediated.json", dir);
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : doc.to_failure().describe()));
    // The native probe: its directory bound read-only, and it may run.
    const std::string bin = test::build_dir() + "/test-bin";
    policy::fs_rule fs;
    fs.verdict = policy::action::allow;
    fs.path = bin;
    fs.perms = policy::to_access(policy::fs_perm::read_file) |
               policy::to_access(policy::fs_perm::read_dir) |
               policy::to_access(policy::fs_perm::execute);
    doc->fs_rules.push_back(fs);
    policy::exec_rule ex;
    ex.verdict = policy::action::allow;
    ex.path = probe_binary();
    doc->exec_rules.push_back(ex);
    // A script the policy allows, whose #! names the denied shell.
    ex.path = shebang_script();
    doc->exec_rules.push_back(ex);
    std::ofstream(shebang_script()) << "#!/bin/sh\necho ran\n";
    ::chmod(shebang_script().c_str(), 0755);
    auto ok = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    // A build below /tmp: rules there speak of the sandbox's own /tmp and
    // bind nothing, so the probe's directory is bound here as the rule binds
    // it anywhere else.
    if (in_default_root(bin))
      pc.sandbox.extra_paths.push_back({bin, false, fs.perms});
    BOOST_REQUIRE(!pc.sandbox.notify.empty());
    pc.worker_stderr = std::getenv("CASTELLAN_WORKER_STDERR") != nullptr;
    auto p = spawn_pool(sys, pc);
    BOOST_REQUIRE_MESSAGE(p, (p ? "" : p.error().describe()));
    pool = *p;
  }
  ~mediated_pool() { caf::anon_send(pool, shutdown_atom::value); }

  exec_result run(std::vector<std::string> argv,
                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
    exec_request req;
    req.argv = std::move(argv);
    // The exec's own deadline too (else the policy's 30 s): the race runs
    // 100,000 decided opens, slow under sanitizers on a busy machine.
    req.timeout_ms = static_cast<uint64_t>(timeout.count()) * 1000;
    return exec(pool, std::move(req), timeout);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(mediation_tests)

BOOST_FIXTURE_TEST_CASE(a_denied_write_raises_permission_error_and_the_code_continues,
                        mediated_pool) {
  auto r = exec_code(pool, R"(
import os
os.makedirs('/tmp/denied', exist_ok=True)
try:
    open('/tmp/denied/report.txt', 'w')
    print('opened')
except PermissionError as e:
    print('denied:', e)
with open('/tmp/fine.txt', 'w') as f:
    f.write('ok')
print('later', open('/tmp/fine.txt').read())
)");
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.stdout_data.find("denied: [Errno 13] Permission denied by policy 'mediated' "
                                "(rule /fs/rules/10: openat /tmp/denied/report.txt)") !=
                 std::string::npos,
             r.stdout_data);
  BOOST_TEST(r.stdout_data.find("later ok\n") != std::string::npos, r.stdout_data);
  const auto* e = find_event(r, "syscall_denied", "/tmp/denied/report.txt");
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST((e->decision == event_decision::deny));
  BOOST_TEST(e->rule == "/fs/rules/10");
  BOOST_TEST(e->syscall == "openat");
  BOOST_TEST(e->pid > 0);
  BOOST_TEST(e->timestamp_ns > 0);
}

BOOST_FIXTURE_TEST_CASE(a_denied_exec_of_a_shell_fails_and_the_worker_lives_on, mediated_pool) {
  auto r = exec_code(pool, R"(
import os
try:
    os.execv('/bin/sh', ['sh', '-c', 'echo escaped'])
except PermissionError as e:
    print('exec:', e)
print('still here')
)");
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail);
  BOOST_TEST(r.stdout_data.find("Permission denied by policy 'mediated' (rule /exec/rules/") !=
                 std::string::npos,
             r.stdout_data);
  BOOST_TEST(r.stdout_data.find("still here") != std::string::npos);
  BOOST_TEST(find_event(r, "syscall_denied", "/bin/sh") != nullptr);
  auto next = exec_code(pool, "print('again')");
  BOOST_TEST(next.stdout_data == "again\n");
  BOOST_TEST(next.worker_id == r.worker_id); // the same worker: denials never kill
}

BOOST_FIXTURE_TEST_CASE(a_script_whose_interpreter_is_denied_is_refused, mediated_pool) {
  // The script is allowed, but the kernel would start its #! interpreter,
  // the denied /bin/sh, as a program: the exec is refused naming it.
  auto r = run({shebang_script()});
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail);
  BOOST_TEST(r.stdout_data.find("ran") == std::string::npos, r.stdout_data);
  const auto* e = find_event(r, "syscall_denied", "/bin/sh");
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->rule == "/exec/rules/2"); // after the two of default.json it extends
  BOOST_TEST(e->syscall == "execve");
}

BOOST_FIXTURE_TEST_CASE(the_loader_run_as_a_program_is_refused_by_the_exec_default,
                        mediated_pool) {
  // ld.so keeps Landlock EXECUTE for the programs that name it; run as a
  // program (here to start the denied shell) the decided exec refuses it.
  auto r = run({"/lib64/ld-linux-x86-64.so.2", "/usr/bin/dash", "-c", "echo ran"});
  BOOST_TEST_MESSAGE(r.exit_code << " " << r.stdout_data << r.stderr_data << r.detail);
  BOOST_TEST(r.stdout_data.find("ran") == std::string::npos, r.stdout_data);
  const auto* e = find_event(r, "syscall_denied", "/lib64/ld-linux-x86-64.so.2");
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST(e->rule == "default");
}

BOOST_FIXTURE_TEST_CASE(an_optimistic_read_of_a_denied_path_kills_the_worker, mediated_pool) {
  auto r = exec_code(pool, R"(
import os
os.makedirs('/tmp/secret', exist_ok=True)
with open('/tmp/secret/key', 'w') as f:
    f.write('s3cr3t')
data = open('/tmp/secret/key').read()
print('leaked', data)
)");
  BOOST_TEST((r.error == error_class::policy_kill), to_string(r.error) << " " << r.detail);
  BOOST_TEST(r.stdout_data.find("s3cr3t") == std::string::npos);
  BOOST_TEST(r.detail.find("/tmp/secret/key") != std::string::npos, r.detail);
  const auto* e = find_event(r, "optimistic_violation", "/tmp/secret/key");
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST((e->decision == event_decision::kill));
  BOOST_TEST(e->rule == "/fs/rules/11");
  // A fresh worker serves the next exec.
  auto next = exec_code(pool, "print('fresh')");
  BOOST_TEST((next.error == error_class::ok), to_string(next.error) << " " << next.detail);
  BOOST_TEST(next.stdout_data == "fresh\n");
  BOOST_TEST(next.worker_id != r.worker_id);
}

BOOST_FIXTURE_TEST_CASE(a_warned_path_is_allowed_and_reported, mediated_pool) {
  auto r = exec_code(pool, R"(
import os
os.makedirs('/tmp/warned', exist_ok=True)
with open('/tmp/warned/notes', 'w') as f:
    f.write('w')
print(open('/tmp/warned/notes').read())
)");
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.stdout_data == "w\n");
  const auto* e = find_event(r, "policy_warning", "/tmp/warned/notes");
  BOOST_REQUIRE(e != nullptr);
  BOOST_TEST((e->decision == event_decision::warn));
  BOOST_TEST(e->rule == "/fs/rules/12");
}

BOOST_FIXTURE_TEST_CASE(a_native_program_gets_the_plain_errno, mediated_pool) {
  auto r = run({probe_binary(), "write", "/tmp/denied/out"});
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.stdout_data == "EACCES\nafter\n");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(find_event(r, "syscall_denied", "/tmp/denied/out") != nullptr);
  r = run({probe_binary(), "exec", "/bin/sh"});
  BOOST_TEST(r.stdout_data == "EACCES\nafter\n");
  BOOST_TEST(find_event(r, "syscall_denied", "/bin/sh") != nullptr);
  r = run({probe_binary(), "write", "/tmp/allowed"});
  BOOST_TEST(r.stdout_data == "ok\nafter\n");
}

BOOST_FIXTURE_TEST_CASE(a_flipped_path_buffer_never_opens_the_denied_file, mediated_pool) {
  // One thread flips the buffer between an allowed and a denied path while
  // another opens it: the supervisor reads the path once and opens what it
  // read, so the denied file is never opened, whatever the timing.
  auto r = run({probe_binary(), "race", "/tmp/allowed", "/tmp/nowrite/target", "100000"},
               std::chrono::seconds(120));
  BOOST_TEST_MESSAGE("race: " << r.stdout_data);
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.exit_code == 0, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("denied_opened 0") != std::string::npos, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("RACE LOST") == std::string::npos);
}

BOOST_FIXTURE_TEST_CASE(removals_are_performed_by_the_supervisor_or_refused, mediated_pool) {
  auto r = run({probe_binary(),          "ops",
                "mkdir:/tmp/keep",       "write:/tmp/keep/f:x",
                "unlink:/tmp/keep/f",    "unlinkat:/tmp/keep:f",
                "mkdir:/tmp/keep/d",     "rmdir:/tmp/keep/d",
                "write:/tmp/free:y",     "unlink:/tmp/free",
                "stat:/tmp/free",        "mkdir:/tmp/freedir",
                "rmdir:/tmp/freedir/",   "stat:/tmp/freedir",
                "stat:/tmp/keep/f",      "unlink:/tmp/keep/f/",
                "mkdir:/tmp/adir",       "unlink:/tmp/adir",
                "rmdir:/tmp/nothing",    "mkdir:/tmp/warned",
                "write:/tmp/warned/w:z", "unlink:/tmp/warned/w",
                "stat:/tmp/warned/w"});
  expect_lines(
      r, {"unlink:/tmp/keep/f: EACCES", "unlinkat:/tmp/keep:f: EACCES", "rmdir:/tmp/keep/d: EACCES",
          "unlink:/tmp/free: ok", "stat:/tmp/free: ENOENT", "rmdir:/tmp/freedir/: ok",
          "stat:/tmp/freedir: ENOENT", "stat:/tmp/keep/f: uid=1000 type=file mode=644 size=1",
          "unlink:/tmp/keep/f/: ENOTDIR", "unlink:/tmp/adir: EISDIR", "rmdir:/tmp/nothing: ENOENT",
          "unlink:/tmp/warned/w: ok", "stat:/tmp/warned/w: ENOENT"});
  expect_event(r, "syscall_denied", "unlink", "/tmp/keep/f", "/fs/rules/14");
  expect_event(r, "syscall_denied", "rmdir", "/tmp/keep/d", "/fs/rules/14");
  expect_event(r, "policy_warning", "unlink", "/tmp/warned/w", "/fs/rules/16");
  BOOST_TEST(std::count_if(r.events.begin(), r.events.end(), [](const policy_event& e) {
               return e.syscall == "unlinkat" && e.target == "/tmp/keep/f";
             }) == 1);
}

BOOST_FIXTURE_TEST_CASE(creations_get_the_callers_umask_and_owner_or_are_refused, mediated_pool) {
  // First with the umask the sandbox inherited (read once by the
  // supervisor), then with umask(2) calls of the probe's own.
  auto first = run({probe_binary(), "ops", "status-umask", "mkdir:/tmp/first:777",
                    "mknod:/tmp/first-node", "stat:/tmp/first", "stat:/tmp/first-node"});
  unsigned inherited = 0;
  const auto at = first.stdout_data.find("status-umask: umask=");
  BOOST_REQUIRE_MESSAGE(at != std::string::npos, first.stdout_data);
  BOOST_REQUIRE(std::sscanf(first.stdout_data.c_str() + at + 20, "%o", &inherited) == 1);
  char dir_mode[16];
  char node_mode[16];
  std::snprintf(dir_mode, sizeof dir_mode, "%o", 0777u & ~inherited);
  std::snprintf(node_mode, sizeof node_mode, "%o", 0644u & ~inherited);
  BOOST_TEST(has_line(first.stdout_data, std::string("stat:/tmp/first: uid=1000 type=dir mode=") +
                                             dir_mode + " size=40"),
             first.stdout_data);
  BOOST_TEST(
      has_line(first.stdout_data, std::string("stat:/tmp/first-node: uid=1000 type=file mode=") +
                                      node_mode + " size=0"),
      first.stdout_data);
  auto r = run({probe_binary(),
                "ops",
                "umask:022",
                "mkdir:/tmp/denied",
                "mkdir:/tmp/denied/sub",
                "mkdir:/tmp/made:777",
                "stat:/tmp/made",
                "umask:0",
                "mkdir:/tmp/made0:777",
                "stat:/tmp/made0",
                "umask:022",
                "mkdir:/tmp/../../tmp/denied/x",
                "symlink:/etc/passwd:/tmp/denied/l",
                "symlink:/tmp/made:/tmp/l",
                "readlink:/tmp/l",
                "lstat:/tmp/l",
                "mkfifo:/tmp/denied/fifo",
                "mkfifo:/tmp/fifo",
                "stat:/tmp/fifo",
                "mknod:/tmp/denied/file",
                "mknod:/tmp/node",
                "stat:/tmp/node",
                "mknod-chr:/tmp/chr",
                "mkdir:/tmp/made",
                "mkdir:/usr/lib/castellan-x",
                "mkdir:/tmp/warned",
                "mkdir:/tmp/warned/d",
                "stat:/tmp/warned/d",
                "mkdir:/tmp/slashed/",
                "symlink:/tmp/made:/tmp/l2/",
                "symlink:/tmp/made:/tmp/l",
                "link:/tmp/node:/tmp/l"});
  expect_lines(
      r, {"mkdir:/tmp/denied: ok", "mkdir:/tmp/denied/sub: EACCES",
          "stat:/tmp/made: uid=1000 type=dir mode=755 size=40",
          "stat:/tmp/made0: uid=1000 type=dir mode=777 size=40",
          "mkdir:/tmp/../../tmp/denied/x: EACCES", "symlink:/etc/passwd:/tmp/denied/l: EACCES",
          "symlink:/tmp/made:/tmp/l: ok", "readlink:/tmp/l: '/tmp/made'",
          "mkfifo:/tmp/denied/fifo: EACCES", "stat:/tmp/fifo: uid=1000 type=fifo mode=644 size=0",
          "mknod:/tmp/denied/file: EACCES", "stat:/tmp/node: uid=1000 type=file mode=644 size=0",
          "mknod-chr:/tmp/chr: EPERM", "mkdir:/tmp/made: EEXIST",
          "mkdir:/usr/lib/castellan-x: EROFS", "mkdir:/tmp/warned/d: ok",
          // A name to create: only mkdir takes a trailing slash; an existing
          // name is EEXIST, for a symlink and a hard link alike.
          "mkdir:/tmp/slashed/: ok", "symlink:/tmp/made:/tmp/l2/: ENOENT",
          "symlink:/tmp/made:/tmp/l: EEXIST", "link:/tmp/node:/tmp/l: EEXIST"});
  BOOST_TEST(has_line(r.stdout_data, "lstat:/tmp/l: uid=1000 type=link mode=777 size=9"),
             r.stdout_data);
  expect_event(r, "syscall_denied", "mkdir", "/tmp/denied/sub", "/fs/rules/13");
  expect_event(r, "syscall_denied", "mkdir", "/tmp/denied/x", "/fs/rules/13");
  expect_event(r, "syscall_denied", "symlink", "/tmp/denied/l", "/fs/rules/13");
  // glibc's mknod and mkfifo call mknodat
  expect_event(r, "syscall_denied", "mknodat", "/tmp/denied/fifo", "/fs/rules/13");
  expect_event(r, "syscall_denied", "mknodat", "/tmp/denied/file", "/fs/rules/10");
  expect_event(r, "policy_warning", "mkdir", "/tmp/warned/d", "/fs/rules/16");
}

BOOST_FIXTURE_TEST_CASE(truncate_is_decided_on_the_file_it_reaches, mediated_pool) {
  auto r =
      run({probe_binary(), "ops", "mkdir:/tmp/nowrite", "mknod:/tmp/nowrite/f",
           "symlink:/tmp/nowrite/f:/tmp/via", "truncate:/tmp/nowrite/f:10", "truncate:/tmp/via:10",
           "stat:/tmp/nowrite/f", "write:/tmp/t:hello", "truncate:/tmp/t:2", "read:/tmp/t",
           "truncate:/etc/passwd:0", "truncate:/tmp:0", "truncate:/tmp/missing:0"});
  expect_lines(r, {"truncate:/tmp/nowrite/f:10: EACCES", "truncate:/tmp/via:10: EACCES",
                   "stat:/tmp/nowrite/f: uid=1000 type=file mode=644 size=0",
                   "truncate:/tmp/t:2: ok", "read:/tmp/t: 'he'", "truncate:/etc/passwd:0: EROFS",
                   "truncate:/tmp:0: EISDIR", "truncate:/tmp/missing:0: ENOENT"});
  expect_event(r, "syscall_denied", "truncate", "/tmp/nowrite/f", "/fs/rules/15");
}

BOOST_FIXTURE_TEST_CASE(renames_and_links_never_give_a_kept_file_a_way_out, mediated_pool) {
  auto r = run({probe_binary(), "ops", "mkdir:/tmp/keep", "write:/tmp/keep/target:precious",
                // a symlink in an allowed directory: unlink removes the link only
                "symlink:/tmp/keep/target:/tmp/lnk", "unlink:/tmp/lnk", "lstat:/tmp/lnk",
                "read:/tmp/keep/target",
                // replacing the kept file, directly or through a symlinked directory
                "write:/tmp/a:A", "rename:/tmp/a:/tmp/keep/target", "symlink:/tmp/keep:/tmp/kd",
                "rename:/tmp/a:/tmp/kd/target", "exchange:/tmp/a:/tmp/keep/target",
                "read:/tmp/keep/target",
                // moving it (or its directory) away
                "rename:/tmp/keep/target:/tmp/out", "rename:/tmp/keep:/tmp/keep2",
                // ordinary renames and links
                "rename:/tmp/a:/tmp/b", "read:/tmp/b", "stat:/tmp/a",
                "rename-noreplace:/tmp/b:/tmp/keep/target", "link:/tmp/b:/tmp/c", "stat:/tmp/c",
                "mkdir:/tmp/denied", "link:/tmp/b:/tmp/denied/b",
                // a hard link or a rename out of a write-denied directory
                "mkdir:/tmp/nowrite", "mknod:/tmp/nowrite/f", "link:/tmp/nowrite/f:/tmp/f2",
                "rename:/tmp/nowrite/f:/tmp/f3", "rename:/tmp/nowrite/f:/tmp/nowrite/g",
                // what lies beneath a directory moves along
                "mkdir:/tmp/deep", "mkdir:/tmp/deep/a", "mknod:/tmp/deep/a/secret",
                "rename:/tmp/deep/a:/tmp/deep/b", "rename:/tmp/deep/b:/tmp/shallow",
                "stat:/tmp/deep/b/secret", "rename:/tmp/b/:/tmp/x", "rename:/usr/lib:/usr/lib2"});
  expect_lines(r, {"symlink:/tmp/keep/target:/tmp/lnk: ok",
                   "unlink:/tmp/lnk: ok",
                   "lstat:/tmp/lnk: ENOENT",
                   "rename:/tmp/a:/tmp/keep/target: EACCES",
                   "rename:/tmp/a:/tmp/kd/target: EACCES",
                   "exchange:/tmp/a:/tmp/keep/target: EACCES",
                   "read:/tmp/keep/target: 'precious'",
                   "rename:/tmp/keep/target:/tmp/out: EACCES",
                   "rename:/tmp/keep:/tmp/keep2: EACCES",
                   "rename:/tmp/a:/tmp/b: ok",
                   "read:/tmp/b: 'A'",
                   "stat:/tmp/a: ENOENT",
                   "rename-noreplace:/tmp/b:/tmp/keep/target: EEXIST",
                   "link:/tmp/b:/tmp/c: ok",
                   "stat:/tmp/c: uid=1000 type=file mode=644 size=1",
                   "link:/tmp/b:/tmp/denied/b: EACCES",
                   "link:/tmp/nowrite/f:/tmp/f2: EACCES",
                   "rename:/tmp/nowrite/f:/tmp/f3: EACCES",
                   "rename:/tmp/nowrite/f:/tmp/nowrite/g: ok",
                   "rename:/tmp/deep/a:/tmp/deep/b: ok",
                   "rename:/tmp/deep/b:/tmp/shallow: EACCES",
                   "stat:/tmp/deep/b/secret: uid=1000 type=file mode=644 size=0",
                   "rename:/tmp/b/:/tmp/x: ENOTDIR",
                   "rename:/usr/lib:/usr/lib2: EROFS"});
  expect_event(r, "syscall_denied", "rename", "/tmp/keep/target", "/fs/rules/14");
  expect_event(r, "syscall_denied", "link", "/tmp/denied/b", "/fs/rules/10");
  expect_event(r, "syscall_denied", "link", "/tmp/nowrite/f", "/fs/rules/15");
  expect_event(r, "syscall_denied", "rename", "/tmp/deep/b", "/fs/rules/17");
  expect_event(r, "syscall_denied", "renameat2", "/tmp/keep/target", "/fs/rules/14");
}

BOOST_FIXTURE_TEST_CASE(python_gets_permission_errors_naming_the_rule, mediated_pool) {
  auto r = exec_code(pool, R"(
import os, socket

def attempt(what, fn, *args):
    try:
        fn(*args)
        print(what, 'done')
    except PermissionError as e:
        print(what, e)

os.makedirs('/tmp/keep', exist_ok=True)
os.makedirs('/tmp/nowrite', exist_ok=True)
os.makedirs('/tmp/denied', exist_ok=True)
open('/tmp/keep/f', 'w').close()
os.mknod('/tmp/nowrite/f')
open('/tmp/plain', 'w').close()
attempt('unlink', os.unlink, '/tmp/keep/f')
attempt('remove', os.remove, '/tmp/keep/f')
attempt('rename', os.rename, '/tmp/plain', '/tmp/keep/f')
attempt('replace', os.replace, '/tmp/keep/f', '/tmp/out')
attempt('mkdir', os.mkdir, '/tmp/denied/d')
os.mkdir('/tmp/keep/d')
attempt('rmdir', os.rmdir, '/tmp/keep/d')
attempt('link', os.link, '/tmp/plain', '/tmp/denied/l')
attempt('symlink', os.symlink, '/tmp/plain', '/tmp/denied/s')
attempt('truncate', os.truncate, '/tmp/nowrite/f', 3)
attempt('connect', socket.socket().connect, ('203.0.113.9', 443))
attempt('sendto', socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto, b'x', ('127.0.0.1', 5353))
attempt('bind', socket.socket(socket.AF_INET, socket.SOCK_DGRAM).bind, ('127.0.0.1', 5301))
unix = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
unix.bind('/tmp/nowrite/sock')
attempt('unix connect', socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).connect, '/tmp/nowrite/sock')
attempt('plain rename', os.rename, '/tmp/plain', '/tmp/plain2')
print('still here', os.path.exists('/tmp/keep/f'))
)");
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  const std::string prefix = "[Errno 13] Permission denied by policy 'mediated' (rule ";
  const std::pair<const char*, const char*> expected[] = {
      {"unlink", "/fs/rules/14: unlink /tmp/keep/f)"},
      {"remove", "/fs/rules/14: unlink /tmp/keep/f)"},
      {"rename", "/fs/rules/14: rename /tmp/keep/f)"},
      {"replace", "/fs/rules/14: rename /tmp/keep/f)"},
      {"mkdir", "/fs/rules/13: mkdir /tmp/denied/d)"},
      {"rmdir", "/fs/rules/14: rmdir /tmp/keep/d)"},
      {"link", "/fs/rules/10: link /tmp/denied/l)"},
      {"symlink", "/fs/rules/13: symlink /tmp/denied/s)"},
      {"truncate", "/fs/rules/15: truncate /tmp/nowrite/f)"},
      {"connect", "/net/rules/0: connect tcp 203.0.113.9:443)"},
      {"sendto", "/net/rules/1: sendto udp 127.0.0.1:5353)"},
      {"bind", "/net/rules/1: bind udp 127.0.0.1:5301)"},
      {"unix connect", "/fs/rules/15: connect /tmp/nowrite/sock)"},
  };
  for (const auto& [what, rest] : expected) {
    const std::string line = std::string(what) + " " + prefix + rest;
    BOOST_TEST(r.stdout_data.find(line) != std::string::npos, "missing '" << line << "' in:\n"
                                                                          << r.stdout_data);
  }
  BOOST_TEST(r.stdout_data.find("plain rename done") != std::string::npos, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("still here True") != std::string::npos, r.stdout_data);
  expect_event(r, "syscall_denied", "connect", "tcp 203.0.113.9:443", "/net/rules/0");
}

BOOST_FIXTURE_TEST_CASE(addresses_are_decided_against_the_net_rules, mediated_pool) {
  auto r = run({probe_binary(), "ops", "tcp-connect:203.0.113.5,80", "tcp-connect:198.51.100.1,80",
                "udp-sendto:127.0.0.1,5353", "udp-bind:127.0.0.1,5300",
                "udp-connect:127.0.0.1,5399", "udp-pair:6001", "udp-pair:7001"});
  // 6001: no rule, and the default (default.json's deny) covers the
  // sandbox's own loopback too, which nothing but the supervisor closes to
  // UDP; 7001: a warn rule lets it through.
  expect_lines(r, {"tcp-connect:203.0.113.5,80: EACCES", "udp-sendto:127.0.0.1,5353: EACCES",
                   "udp-bind:127.0.0.1,5300: EACCES", "udp-connect:127.0.0.1,5399: EACCES",
                   "udp-pair:6001: EACCES", "udp-pair:7001: received 'ping'"});
  // Not a rule's business: the kernel answers (Landlock refuses TCP to
  // any port but the relay's, and there is no route out of the sandbox).
  BOOST_TEST(!has_line(r.stdout_data, "tcp-connect:198.51.100.1,80: ok"), r.stdout_data);
  BOOST_TEST(find_event(r, "syscall_denied", "tcp 198.51.100.1:80") == nullptr);
  expect_event(r, "syscall_denied", "connect", "tcp 203.0.113.5:80", "/net/rules/0");
  expect_event(r, "syscall_denied", "sendto", "udp 127.0.0.1:5353", "/net/rules/1");
  expect_event(r, "syscall_denied", "bind", "udp 127.0.0.1:5300", "/net/rules/1");
  expect_event(r, "syscall_denied", "bind", "udp 127.0.0.1:6001", "default");
  expect_event(r, "policy_warning", "sendto", "udp 127.0.0.1:7001", "/net/rules/2");
  BOOST_TEST(find_event(r, "policy_warning", "udp 127.0.0.1:6001") == nullptr);
}

BOOST_FIXTURE_TEST_CASE(pathname_sockets_are_files, mediated_pool) {
  auto r = run({probe_binary(),
                "ops",
                "mkdir:/tmp/nowrite",
                "unix-listen:/tmp/nowrite/srv",
                "unix-connect:/tmp/nowrite/srv",
                "symlink:/tmp/nowrite/srv:/tmp/srvlink",
                "unix-connect:/tmp/srvlink",
                "mkdir:/tmp/denied",
                "unix-listen:/tmp/denied/s",
                "unix-listen:/tmp/ok.sock",
                "unix-connect:/tmp/ok.sock",
                "stat:/tmp/ok.sock",
                "unix-dgram-bind:/tmp/dg.sock",
                "unix-sendto:/tmp/dg.sock",
                "unix-sendmsg:/tmp/dg.sock",
                "unix-sendfd:/tmp/dg.sock",
                "unix-dgram-bind:/tmp/nowrite/dg",
                "unix-sendto:/tmp/nowrite/dg",
                "unix-sendmsg:/tmp/nowrite/dg",
                "unix-connect:/tmp/none.sock",
                "unix-listen:/tmp/ok.sock"});
  expect_lines(r, {"unix-listen:/tmp/nowrite/srv: bound 'srv'",
                   "unix-connect:/tmp/nowrite/srv: EACCES", "unix-connect:/tmp/srvlink: EACCES",
                   "unix-listen:/tmp/denied/s: EACCES", "unix-listen:/tmp/ok.sock: bound 'ok.sock'",
                   "unix-connect:/tmp/ok.sock: accepted 'hello' peer uid=1000",
                   "stat:/tmp/ok.sock: uid=1000 type=sock mode=755 size=0",
                   "unix-sendto:/tmp/dg.sock: received 'dgram'",
                   "unix-sendmsg:/tmp/dg.sock: received 'dgram'",
                   "unix-sendfd:/tmp/dg.sock: passed fd wrote 'via'",
                   "unix-sendto:/tmp/nowrite/dg: EACCES", "unix-sendmsg:/tmp/nowrite/dg: EACCES",
                   "unix-connect:/tmp/none.sock: ENOENT", "unix-listen:/tmp/ok.sock: EADDRINUSE"});
  expect_event(r, "syscall_denied", "connect", "/tmp/nowrite/srv", "/fs/rules/15");
  expect_event(r, "syscall_denied", "bind", "/tmp/denied/s", "/fs/rules/13");
  expect_event(r, "syscall_denied", "sendto", "/tmp/nowrite/dg", "/fs/rules/15");
  expect_event(r, "syscall_denied", "sendmsg", "/tmp/nowrite/dg", "/fs/rules/15");
}

BOOST_FIXTURE_TEST_CASE(a_flipped_path_buffer_never_unlinks_or_replaces_the_kept_file,
                        mediated_pool) {
  // As for opens: one thread flips the buffer between an allowed and a
  // denied path while another unlinks (or renames onto) it. The supervisor
  // copies the path once and acts on the directory it resolved, so the
  // kept file is never removed or replaced, whatever the timing.
  auto r = run({probe_binary(), "race-unlink", "/tmp/allowed", "/tmp/keep/target", "20000"},
               std::chrono::seconds(120));
  BOOST_TEST_MESSAGE("race-unlink: " << r.stdout_data);
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.exit_code == 0, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("denied_touched 0") != std::string::npos, r.stdout_data);
  BOOST_TEST(r.stdout_data.find(" removed 0 ") == std::string::npos, r.stdout_data);
  r = run(
      {probe_binary(), "race-rename", "/tmp/source", "/tmp/allowed", "/tmp/keep/other", "20000"},
      std::chrono::seconds(120));
  BOOST_TEST_MESSAGE("race-rename: " << r.stdout_data);
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.exit_code == 0, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("denied_touched 0") != std::string::npos, r.stdout_data);
  BOOST_TEST(r.stdout_data.find(" renamed 0 ") == std::string::npos, r.stdout_data);
}

BOOST_AUTO_TEST_SUITE_END()
