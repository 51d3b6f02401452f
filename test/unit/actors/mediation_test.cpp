// Decided system calls end to end: a real pool under
// test/integration/data/mediated.json (the default policy plus carve-outs
// only the supervisor can decide), Python code and a native program
// (test/support/notify_probe.c) in command mode.

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdlib>
#include <string>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/pool/syscall_mediator.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;

namespace {

std::string probe_binary() {
  return test::build_dir() + "/test-bin/notify_probe";
}

const policy_event* find_event(const exec_result& r, const std::string& kind,
                               const std::string& target) {
  auto it = std::find_if(r.events.begin(), r.events.end(), [&](const policy_event& e) {
    return e.kind == kind && e.target == target;
  });
  return it == r.events.end() ? nullptr : &*it;
}

struct mediated_pool : test::actor_system_fixture {
  pool_actor pool;

  mediated_pool() {
    auto pc = test_pool(1);
    const std::string dir = test::source_dir() + "/policies";
    auto doc = policy::load_policy(test::source_dir() + "/test/integration/data/mediated.json", dir);
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
    auto ok = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    BOOST_REQUIRE(!pc.sandbox.notify.empty());
    pc.worker_stderr = std::getenv("CASTELLAN_WORKER_STDERR") != nullptr;
    auto p = spawn_pool(sys, pc);
    BOOST_REQUIRE_MESSAGE(p, (p ? "" : p.error().describe()));
    pool = *p;
  }
  ~mediated_pool() { caf::anon_send(pool, shutdown_atom::value); }

  exec_result run(std::vector<std::string> argv, std::chrono::seconds timeout =
                                                     std::chrono::seconds(60)) {
    exec_request req;
    req.argv = std::move(argv);
    return exec(pool, std::move(req), timeout);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(mediation_tests)

BOOST_AUTO_TEST_CASE(the_notify_set_follows_the_policy) {
  const std::string dir = test::source_dir() + "/policies";
  // The default policy has nothing the static layers cannot decide.
  auto def = policy::load_policy(dir + "/default.json", dir);
  BOOST_REQUIRE(def);
  BOOST_TEST(notify_spec_for(*def).empty());
  // strict.json denies writes on the whole tree: the default's job.
  auto strict = policy::load_policy(dir + "/strict.json", dir);
  BOOST_REQUIRE(strict);
  BOOST_TEST(notify_spec_for(*strict).empty());
  auto med = policy::load_policy(test::source_dir() + "/test/integration/data/mediated.json", dir);
  BOOST_REQUIRE(med);
  auto spec = notify_spec_for(*med);
  BOOST_TEST(!spec.open_writes_only); // reads under /tmp/secret are decided
  for (const char* name : {"open", "openat", "creat", "openat2", "execve", "execveat"})
    BOOST_TEST((std::count(spec.syscalls.begin(), spec.syscalls.end(), name) == 1), name);
  // Only write rules: reads stay out of the filter.
  med->fs_rules.erase(std::remove_if(med->fs_rules.begin(), med->fs_rules.end(),
                                     [](const policy::fs_rule& r) {
                                       return r.path == "/tmp/secret" || r.path == "/tmp/warned";
                                     }),
                      med->fs_rules.end());
  med->exec_rules.clear();
  spec = notify_spec_for(*med);
  BOOST_TEST(spec.open_writes_only);
  BOOST_TEST(spec.syscalls.size() == 4u);
}

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
  BOOST_TEST(e->decision == "deny");
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
  BOOST_TEST(e->decision == "kill");
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
  BOOST_TEST(e->decision == "warn");
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
  auto r = run({probe_binary(), "race", "/tmp/allowed", "/tmp/denied/target", "100000"},
               std::chrono::seconds(120));
  BOOST_TEST_MESSAGE("race: " << r.stdout_data);
  BOOST_TEST((r.error == error_class::ok), to_string(r.error) << " " << r.detail << r.stderr_data);
  BOOST_TEST(r.exit_code == 0, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("denied_opened 0") != std::string::npos, r.stdout_data);
  BOOST_TEST(r.stdout_data.find("RACE LOST") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
