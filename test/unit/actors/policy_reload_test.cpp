// A pool follows its policy file: an edit while execs run reaches new workers,
// running execs finish under the revision they started with, and a broken
// edit is refused, audited and changes nothing.

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <stdlib.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/actor_system_fixture.hpp"
#include "support/build_paths.hpp"

using namespace castellan;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

/// A directory that exists only for one test.
struct scratch_dir {
  std::string path;
  explicit scratch_dir(const char* pattern) {
    std::string tmpl = pattern;
    const char* p = ::mkdtemp(tmpl.data());
    BOOST_REQUIRE(p != nullptr);
    path = p;
    ::chmod(p, 0755); // the sandbox's user reads what is bound from here
  }
  ~scratch_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// Replaces `path` as an editor does: the whole new text appears at once.
void write_atomically(const std::string& path, const std::string& text) {
  // Written beside the watched directory, then renamed into it: the watcher
  // sees one rename, never a half-written file.
  const fs::path dir = fs::path(path).parent_path();
  const std::string next = (dir.parent_path() / ("." + dir.filename().string() + ".next")).string();
  std::ofstream(next, std::ios::trunc) << text;
  fs::rename(next, path);
}

/// `default` plus reading `readable`, and with `deny_tmp_write`, no writes
/// to /tmp/denied (a rule only the supervisor can decide: a mediated pool).
std::string policy_text(const std::string& readable, bool deny_tmp_write) {
  auto rules = nlohmann::json::array();
  if (!readable.empty())
    rules.push_back({{"action", "allow"}, {"path", readable}, {"perms", {"read_file", "read_dir"}}});
  if (deny_tmp_write)
    rules.push_back(
        {{"action", "deny"}, {"path", "/tmp/denied"}, {"perms", {"write_file", "make_reg"}}});
  return nlohmann::json{{"version", 1}, {"extends", {"default"}}, {"fs", {{"rules", rules}}}}
      .dump(2);
}

/// `default` plus reading `readable` (none when empty), with `limits`.
std::string granting(const std::string& readable, nlohmann::json limits) {
  auto doc = nlohmann::json::parse(policy_text(readable, false));
  doc["limits"] = std::move(limits);
  return doc.dump(2);
}

/// `default` as a whole (no `extends`: a merge would keep the smaller code
/// limit) with `code_bytes` set and `readable` granted.
std::string default_with_code_limit(uint64_t code_bytes, const std::string& readable) {
  std::ifstream in(test::source_dir() + "/policies/default.json");
  auto doc = nlohmann::json::parse(in);
  doc.erase("description");
  doc["limits"]["code_bytes"] = code_bytes;
  doc["fs"]["rules"].push_back(
      {{"action", "allow"}, {"path", readable}, {"perms", {"read_file", "read_dir"}}});
  return doc.dump(2);
}

std::string read_code(const std::string& data_dir) {
  return "try:\n"
         "    print(open('" + data_dir + "/secret.txt').read())\n"
         "except OSError as e:\n"
         "    print(type(e).__name__)\n";
}

/// Waits until `log` has a line for which `match` is true (inotify on the
/// file: woken by each write, not by a timer).
nlohmann::json wait_for_record(const std::string& log, const std::function<bool(const nlohmann::json&)>& match,
                               std::chrono::seconds limit) {
  int in = ::inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
  BOOST_REQUIRE(in >= 0);
  BOOST_REQUIRE(::inotify_add_watch(in, log.c_str(), IN_MODIFY | IN_CLOSE_WRITE) >= 0);
  const auto deadline = std::chrono::steady_clock::now() + limit;
  for (;;) {
    std::ifstream file(log);
    for (std::string line; std::getline(file, line);) {
      auto j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_object() && match(j)) {
        ::close(in);
        return j;
      }
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{in, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) {
      char buf[4096];
      while (::read(in, buf, sizeof buf) > 0) {
      }
    }
  }
  ::close(in);
  BOOST_FAIL("no matching record in " + log);
  return {};
}

struct reload_fixture : test::actor_system_fixture {
  scratch_dir policies{"/tmp/castellan-reload-policies-XXXXXX"};
  scratch_dir data{"/var/tmp/castellan-reload-data-XXXXXX"};
  std::string log = "/tmp/castellan-reload-audit-" + std::to_string(::getpid()) + ".jsonl";
  supervisor_actor sup;

  reload_fixture() {
    fs::copy_file(test::source_dir() + "/policies/default.json", policies.path + "/default.json");
    std::ofstream(data.path + "/secret.txt") << "alpha";
    ::chmod((data.path + "/secret.txt").c_str(), 0644);
  }
  ~reload_fixture() {
    if (sup) {
      // Gone before the policy directory is: its watcher would report the
      // removal.
      self->monitor(sup);
      self->send(sup, shutdown_atom::value);
      bool down = false;
      while (!down)
        self->receive([&](caf::down_msg&) { down = true; }, [](exec_result&) {},
                      [](worker_state_event&) {}, caf::after(60s) >> [&] { down = true; });
    }
    ::unlink(log.c_str());
  }

  std::string policy_file() const { return policies.path + "/p.json"; }

  void start(uint32_t size, const std::function<void(pool_config&)>& adjust = {}) {
    supervisor_config sc;
    auto pc = test_pool(size);
    if (adjust)
      adjust(pc);
    pc.name = "reloading";
    pc.named_policy = "p";
    sc.pools.push_back(pc);
    sc.policies = policy_config{policies.path, true};
    audit_config audit;
    audit.enabled = true;
    audit.events = {"*"};
    audit.file.path = log;
    audit.file.fsync = fsync_policy::every_record;
    sc.audit = audit;
    auto s = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sup = *s;
    self->send(sup, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  }

  pool_status status() {
    pool_status out;
    self->request(sup, 10s, status_atom::value)
        .receive([&](std::vector<pool_status>& all) { out = all.at(0); },
                 [&](caf::error& err) { BOOST_FAIL("status: " + sys.render(err)); });
    return out;
  }

  /// Waits for a worker state event `pred` accepts; results that arrive in
  /// between are kept in `results`.
  worker_state_event wait_for(const std::function<bool(const worker_state_event&)>& pred) {
    for (;;) {
      worker_state_event got;
      bool match = false;
      self->receive([&](worker_state_event& ev) { match = pred(ev); got = std::move(ev); },
                    [&](exec_result& r) { results.push_back(std::move(r)); },
                    caf::after(60s) >> [] { BOOST_FAIL("no such worker state event"); });
      if (match)
        return got;
    }
  }

  void wait_ready(uint32_t n) {
    uint32_t seen = 0;
    wait_for([&](const worker_state_event& ev) {
      return ev.state == worker_state::ready && ++seen == n;
    });
  }

  /// Waits for the idle worker of an older revision to be replaced: the
  /// event of a reload the pool took.
  void wait_replaced() {
    wait_for([](const worker_state_event& ev) {
      return ev.state == worker_state::stopped &&
             ev.reason.find("replaced the one it started") != std::string::npos;
    });
  }

  /// For a reload that finds no idle worker to replace (no event of its
  /// own): asks the pool's status until it reports a newer revision.
  uint64_t wait_revision_above(uint64_t rev) {
    const auto deadline = std::chrono::steady_clock::now() + 60s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (const auto now = status().policy_revision; now > rev)
        return now;
      self->receive([&](exec_result& r) { results.push_back(std::move(r)); },
                    [](worker_state_event&) {}, caf::after(20ms) >> [] {});
    }
    BOOST_FAIL("the pool never took a revision above " << rev);
    return 0;
  }

  exec_result next_result() {
    if (!results.empty()) {
      auto r = std::move(results.front());
      results.erase(results.begin());
      return r;
    }
    std::optional<exec_result> out;
    while (!out)
      self->receive([&](exec_result& r) { out = std::move(r); },
                    [](worker_state_event&) {}, // not waited for here
                    caf::after(60s) >> [] { BOOST_FAIL("no exec result"); });
    return std::move(*out);
  }

  std::vector<exec_result> results;
};

/// Reads the granted file, then writes /tmp/denied: what each says about
/// the policy the exec runs under.
std::string probe_code(const std::string& data_dir, bool wait_for_go) {
  std::string code = "import os, time\n"
                     "def read():\n"
                     "    try:\n"
                     "        return open('" + data_dir + "/secret.txt').read()\n"
                     "    except OSError as e:\n"
                     "        return type(e).__name__\n"
                     "def write():\n"
                     "    try:\n"
                     "        with open('/tmp/denied', 'w') as f: f.write('x')\n"
                     "        return 'wrote'\n"
                     "    except OSError as e:\n"
                     "        return type(e).__name__\n"
                     "first = read()\n";
  if (wait_for_go)
    // The test creates `go` after the pool took the new revision.
    code += "deadline = time.monotonic() + 60\n"
            "while not os.path.exists('" + data_dir + "/go') and time.monotonic() < deadline:\n"
            "    time.sleep(0.005)\n"
            "print('go' if os.path.exists('" + data_dir + "/go') else 'no-go', end=' ')\n";
  code += "print(first, read(), write())\n";
  return code;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(policy_reload_tests, reload_fixture)

BOOST_AUTO_TEST_CASE(an_edit_reaches_new_execs_running_ones_finish_under_the_old_and_a_broken_one_is_refused) {
  write_atomically(policy_file(), policy_text(data.path, false));
  start(2);
  wait_ready(2);
  const auto before = status();
  BOOST_TEST(before.policy == "p");
  BOOST_REQUIRE(before.policy_revision > 0u);

  // An exec under the first revision, still running when the edit lands.
  exec_request long_req;
  long_req.code = probe_code(data.path, true);
  self->send(sup, exec_atom::value, long_req);
  const auto running = wait_for([](const worker_state_event& ev) {
    return ev.state == worker_state::running;
  });

  // The edit: the data directory is no longer granted, and writes to
  // /tmp/denied are refused (by the supervisor, a decided call).
  write_atomically(policy_file(), policy_text("", true));
  // The idle worker of the old revision is replaced at once; the busy one
  // is not touched.
  const auto replaced = wait_for([&](const worker_state_event& ev) {
    return ev.state == worker_state::stopped && ev.reason.find("replaced the one it started") !=
                                                    std::string::npos;
  });
  BOOST_TEST(replaced.worker_id != running.worker_id);
  const auto after = status();
  BOOST_TEST(after.policy_revision > before.policy_revision);
  BOOST_TEST(after.busy == 1u);

  // The running exec finishes under the revision it started with.
  std::ofstream(data.path + "/go") << "";
  auto old_run = next_result();
  BOOST_TEST((old_run.error == error_class::ok));
  BOOST_TEST(old_run.worker_id == running.worker_id);
  BOOST_TEST(old_run.stdout_data == "go alpha alpha wrote\n");
  BOOST_TEST(old_run.events.empty());

  // A new exec runs under the new revision: the directory is not there,
  // and the write is refused with an event naming the rule.
  exec_request fresh;
  fresh.code = probe_code(data.path, false);
  auto new_run = exec(sup, fresh);
  BOOST_TEST((new_run.error == error_class::ok));
  BOOST_TEST(new_run.worker_id != running.worker_id);
  BOOST_TEST(new_run.stdout_data == "FileNotFoundError FileNotFoundError PermissionError\n");
  BOOST_REQUIRE(!new_run.events.empty());
  BOOST_TEST((new_run.events.front().kind == event_kind::syscall_denied));
  BOOST_TEST(new_run.events.front().target == "/tmp/denied");

  // A broken edit: refused, audited, and the revision in force stays.
  std::ofstream(policy_file(), std::ios::trunc) << "{ \"version\": 1, \"fs\": ";
  auto rejected = wait_for_record(
      log, [](const nlohmann::json& j) { return j.value("kind", "") == "policy_rejected"; }, 60s);
  BOOST_TEST(rejected.dump().find("p.json") != std::string::npos);
  auto still = exec(sup, fresh);
  BOOST_TEST(still.stdout_data == "FileNotFoundError FileNotFoundError PermissionError\n");
  const auto last = status();
  BOOST_TEST(last.policy_revision == after.policy_revision);

  // Nothing was lost: every exec was answered, no worker died under one.
  BOOST_TEST(last.lost == 0u);
  BOOST_TEST(last.completed == 3u);

  // The audit log says which revision each exec ran under: the one that
  // started before the edit under the first, the later ones under the edit.
  auto revision_of = [&](uint64_t exec_id, const char* kind) {
    auto rec = wait_for_record(
        log,
        [&](const nlohmann::json& j) {
          return j.value("kind", "") == kind && j.value("exec_id", uint64_t{0}) == exec_id;
        },
        60s);
    BOOST_TEST(rec.value("policy", "") == "p");
    return rec.value("policy_revision", uint64_t{0});
  };
  BOOST_TEST(revision_of(old_run.exec_id, "exec_start") == before.policy_revision);
  BOOST_TEST(revision_of(old_run.exec_id, "exec_end") == before.policy_revision);
  BOOST_TEST(revision_of(new_run.exec_id, "exec_start") == after.policy_revision);
  BOOST_TEST(revision_of(new_run.exec_id, "exec_end") == after.policy_revision);
  BOOST_TEST(revision_of(still.exec_id, "exec_end") == after.policy_revision);
}

BOOST_AUTO_TEST_CASE(a_revision_the_pool_cannot_take_is_audited_and_the_old_one_stays) {
  write_atomically(policy_file(), policy_text(data.path, false));
  start(1);
  wait_ready(1);
  const auto before = status();
  // Valid for the policy actor, but code of 64 MiB does not fit the largest
  // ring a worker gets: the pool refuses this revision. (Without `extends`:
  // a merge keeps the smaller limit of the two.)
  write_atomically(policy_file(), R"({"version": 1, "limits": {"code_bytes": 67108864}})");
  auto rejected = wait_for_record(
      log,
      [](const nlohmann::json& j) {
        return j.value("kind", "") == "policy_rejected" &&
               j.dump().find("not applied") != std::string::npos;
      },
      60s);
  BOOST_TEST(rejected.dump().find("does not fit the ring") != std::string::npos);
  BOOST_TEST(status().policy_revision == before.policy_revision);
  exec_request req;
  req.code = probe_code(data.path, false);
  BOOST_TEST(exec(sup, req).stdout_data == "alpha alpha wrote\n");
}

BOOST_AUTO_TEST_CASE(a_request_policy_never_shares_a_pool_that_follows_its_policy) {
  // The pool's policy grants the data directory; the request's does not.
  // Compared with the pool's config before its policy, the two would look
  // the same: the request must run in a pool of its own, without the grant.
  // Its config before the policy has the limits of `default` (a narrowed
  // exec shares its worker's cgroup and ring) and a longer timeout, so the
  // request's policy is narrower than that config: the route the supervisor
  // would take for a pool that does not follow a policy.
  write_atomically(policy_file(), policy_text(data.path, false));
  start(1, [](pool_config& pc) {
    pc.limits = platform::resource_limits{256ull << 20, 64, 100};
    pc.code_limit = 1u << 20;
    pc.ring_capacity = 2u << 20;
    pc.stdout_limit = pc.stderr_limit = 1u << 20;
    pc.default_timeout_ms = 600000;
    pc.sandbox.loopback = false; // as `default` has it
  });
  wait_ready(1);
  exec_request req;
  req.code = probe_code(data.path, false);
  BOOST_TEST(exec(sup, req).stdout_data == "alpha alpha wrote\n");
  req.policy = R"({"version": 1, "extends": ["default"]})";
  auto own = exec(sup, req);
  BOOST_TEST(own.stdout_data == "FileNotFoundError FileNotFoundError wrote\n");
  BOOST_TEST(own.worker_id != 0u);
  std::vector<pool_status> all;
  self->request(sup, 10s, status_atom::value)
      .receive([&](std::vector<pool_status>& s) { all = s; },
               [&](caf::error& err) { BOOST_FAIL("status: " + sys.render(err)); });
  BOOST_TEST(all.size() == 2u); // the request policy's own pool beside it
}

BOOST_AUTO_TEST_CASE(a_restarted_pool_starts_under_the_revision_in_force) {
  write_atomically(policy_file(), policy_text(data.path, false));
  start(1);
  wait_ready(1);
  BOOST_TEST(exec_code(sup, read_code(data.path)).stdout_data == "alpha\n");
  write_atomically(policy_file(), policy_text("", false));
  wait_replaced();
  const auto rev = status().policy_revision;
  // The pool goes down for another reason than a shutdown: the supervisor
  // starts it again, under the revision in force, not the one it began with.
  pool_actor pool;
  self->request(sup, 10s, get_pool_atom::value, std::string{"reloading"})
      .receive([&](pool_actor& p) { pool = p; },
               [&](caf::error& err) { BOOST_FAIL("get_pool: " + sys.render(err)); });
  self->monitor(pool);
  caf::anon_send_exit(pool, caf::exit_reason::kill);
  bool down = false;
  while (!down)
    self->receive([&](caf::down_msg&) { down = true; }, [](worker_state_event&) {},
                  caf::after(30s) >> [] { BOOST_FAIL("the pool did not go down"); });
  wait_ready(1);
  BOOST_TEST(status().policy_revision == rev);
  BOOST_TEST(exec_code(sup, read_code(data.path)).stdout_data == "FileNotFoundError\n");
}

BOOST_AUTO_TEST_CASE(a_revision_published_before_the_pool_subscribes_still_reaches_it) {
  write_atomically(policy_file(), policy_text(data.path, false));
  auto pol = spawn_policy(sys, policy_config{policies.path, false});
  BOOST_REQUIRE(pol);
  policy_snapshot first;
  self->request(*pol, 10s, policy_get_atom::value, std::string{"p"})
      .receive([&](policy_snapshot& s) { first = std::move(s); },
               [&](caf::error& err) { BOOST_FAIL("get: " + sys.render(err)); });
  BOOST_REQUIRE(first);
  // The edit lands between the snapshot and the pool's subscription.
  write_atomically(policy_file(), policy_text("", false));
  self->request(*pol, 10s, policy_reload_atom::value)
      .receive([](policy_status&) {}, [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
  auto pc = test_pool(1);
  pc.policy = first.policy;
  pc.policies = *pol;
  auto pool = spawn_pool(sys, pc);
  BOOST_REQUIRE(pool);
  // It asks for the revision in force once it has subscribed.
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  uint64_t rev = 0;
  while (rev <= first->revision() && std::chrono::steady_clock::now() < deadline) {
    self->request(*pool, 10s, status_atom::value)
        .receive([&](pool_status& st) { rev = st.policy_revision; }, [](caf::error&) {});
    if (rev <= first->revision())
      self->receive(caf::after(20ms) >> [] {});
  }
  BOOST_TEST(rev > first->revision());
  auto r = exec_code(*pool, read_code(data.path));
  BOOST_TEST(r.stdout_data == "FileNotFoundError\n");
  self->send(*pool, shutdown_atom::value);
  caf::anon_send_exit(*pol, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_revision_whose_workers_cannot_start_is_rolled_back_and_audited) {
  write_atomically(policy_file(), policy_text(data.path, false));
  start(1);
  wait_ready(1);
  const auto rev = status().policy_revision;
  // Valid, but no interpreter starts in 1 MiB.
  write_atomically(policy_file(), granting("", {{"memory_bytes", 1048576}}));
  auto rejected = wait_for_record(
      log,
      [](const nlohmann::json& j) {
        return j.value("kind", "") == "policy_rejected" &&
               j.dump().find("cannot start") != std::string::npos;
      },
      60s);
  BOOST_TEST(rejected.dump().find("reloading") != std::string::npos);
  auto r = exec_code(sup, read_code(data.path));
  BOOST_TEST((r.error == error_class::ok), r.detail);
  BOOST_TEST(r.stdout_data == "alpha\n"); // the revision before it
  BOOST_TEST(status().policy_revision == rev);
}

BOOST_AUTO_TEST_CASE(a_queued_request_too_large_for_the_new_revision_is_refused) {
  write_atomically(policy_file(), default_with_code_limit(8u << 20, data.path));
  start(1);
  wait_ready(1);
  const auto rev = status().policy_revision;
  exec_request hold;
  hold.code = "import os, time\n"
              "while not os.path.exists('" + data.path + "/go'):\n"
              "    time.sleep(0.005)\n";
  self->send(sup, exec_atom::value, hold);
  wait_for([](const worker_state_event& ev) { return ev.state == worker_state::running; });
  // Admitted under the 8 MiB limit, queued behind `hold`.
  exec_request big;
  big.code = "x = 1\n#" + std::string(4u << 20, 'y') + "\n";
  self->send(sup, exec_atom::value, big);
  write_atomically(policy_file(), default_with_code_limit(1u << 20, data.path));
  wait_revision_above(rev);
  const auto spawned = status().spawned;
  std::ofstream(data.path + "/go") << "";
  auto first = next_result();
  auto second = next_result();
  const auto& refused = first.stdout_data.empty() && first.error != error_class::ok ? first : second;
  BOOST_TEST((refused.error == error_class::limit_exceeded), refused.detail);
  BOOST_TEST(refused.detail.find("the limit is 1048576") != std::string::npos);
  // One worker replaces the one `hold` ran on; none is started for `big`.
  BOOST_TEST(status().spawned - spawned <= 1u);
}

BOOST_AUTO_TEST_CASE(the_ceiling_of_request_policies_follows_the_default_pools_policy) {
  write_atomically(policy_file(), policy_text("", false));
  start(1);
  wait_ready(1);
  write_atomically(policy_file(), granting("", {{"memory_bytes", 64u << 20}}));
  wait_replaced();
  exec_request req;
  req.code = "print('ran')\n";
  req.policy = R"({"version": 1, "extends": ["default"], "limits": {"memory_bytes": 209715200}})";
  std::string what;
  self->request(sup, 60s, exec_atom::value, req)
      .receive([&](exec_result& r) { what = "ran: " + r.stdout_data; },
               [&](caf::error& err) { what = sys.render(err); });
  BOOST_TEST(what.find("(ceiling)") != std::string::npos, what);
}

BOOST_AUTO_TEST_CASE(a_pool_cannot_name_a_policy_the_directory_does_not_have) {
  write_atomically(policy_file(), policy_text("", false));
  supervisor_config sc;
  auto pc = test_pool(1);
  pc.named_policy = "absent";
  sc.pools.push_back(pc);
  sc.policies = policy_config{policies.path, false};
  auto s = spawn_supervisor(sys, sc);
  BOOST_REQUIRE(!s);
  BOOST_TEST(s.error().describe().find("policy 'absent'") != std::string::npos);
  sc.policies.reset();
  sc.pools.front().named_policy = "p";
  auto t = spawn_supervisor(sys, sc);
  BOOST_REQUIRE(!t);
  BOOST_TEST(t.error().describe().find("no policy directory") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
