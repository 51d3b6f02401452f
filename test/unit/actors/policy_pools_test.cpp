// Requests that bring their own policy, with real sandboxed workers: a pool
// per distinct policy (keyed by the canonical form's digest), the cap, LRU
// and idle reaping, refusals, and in fork mode the narrowing of a stricter
// policy in the exec's own process.

#include <boost/test/unit_test.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_policy.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

std::string policies_dir() {
  return test::source_dir() + "/policies";
}

/// A host directory outside the sandbox's default root (so a policy rule on
/// it binds it), readable by the sandbox's unprivileged user.
struct host_dir {
  std::string path;
  explicit host_dir(const std::string& content) {
    char tmpl[] = "/var/tmp/castellan-ppool-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    BOOST_REQUIRE(p != nullptr);
    path = p;
    ::chmod(p, 0755);
    std::ofstream(path + "/secret.txt") << content;
    ::chmod((path + "/secret.txt").c_str(), 0644);
  }
  ~host_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

/// `default` plus reading `dirs`.
std::string granting(const std::vector<std::string>& dirs, const std::string& extra = "") {
  nlohmann::json rules = nlohmann::json::array();
  for (const auto& d : dirs)
    rules.push_back({{"action", "allow"}, {"path", d}, {"perms", {"read_file", "read_dir"}}});
  auto doc = nlohmann::json{{"version", 1}, {"extends", {"default"}}, {"fs", {{"rules", rules}}}};
  if (!extra.empty())
    doc.update(nlohmann::json::parse(extra));
  return doc.dump(2);
}

/// The test pool with `policy_text` (resolved in policies/) applied.
pool_config pool_with(const std::string& policy_text, exec_mode mode) {
  auto pc = test::actor_system_fixture::test_pool(1);
  pc.mode = mode;
  auto doc = policy::parse_policy(policy_text, "pool.json");
  BOOST_REQUIRE(doc);
  auto merged = policy::resolve_extends(*doc, policies_dir(), policies_dir());
  BOOST_REQUIRE_MESSAGE(merged, (merged ? "" : merged.to_failure().describe()));
  merged->source = "pool.json";
  auto ok = apply_policy(*merged, pc);
  BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
  return pc;
}

std::string read_code(const std::string& dir) {
  return "try:\n"
         "    print(open('" +
         dir +
         "/secret.txt').read())\n"
         "except OSError as e:\n"
         "    print('denied', e.errno)\n";
}

const char* const uname_code = "import os\n"
                               "try:\n"
                               "    os.uname()\n"
                               "    print('uname ok')\n"
                               "except PermissionError as e:\n"
                               "    print('uname', e.errno)\n";

struct policy_pools_fixture : test::actor_system_fixture {
  supervisor_actor start(pool_config pool, policy_pool_config pp,
                         std::optional<audit_config> audit = std::nullopt) {
    supervisor_config sc;
    sc.audit = std::move(audit);
    sc.pools.push_back(std::move(pool));
    pp.policy_dir = policies_dir();
    sc.policy_pools = std::move(pp);
    auto sup = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(sup, (sup ? "" : sup.error().describe()));
    handle = *sup;
    return handle;
  }
  ~policy_pools_fixture() {
    if (handle)
      caf::anon_send(handle, shutdown_atom::value);
  }

  exec_result run(const std::string& code, const std::string& policy = {}) {
    exec_request req;
    req.code = code;
    req.policy = policy;
    return exec(handle, std::move(req), 60s);
  }

  /// The error a request with `policy` is refused with, as CAF renders it
  /// (quotes inside the message escaped).
  std::string refusal(const std::string& policy) {
    exec_request req;
    req.code = "print('ran')";
    req.policy = policy;
    std::string out = "(not refused)";
    self->request(handle, 30s, exec_atom::value, req)
        .receive([](exec_result&) {}, [&](caf::error& err) { out = sys.render(err); });
    return out;
  }

  /// The pool actor named `name`.
  pool_actor get_pool(const std::string& name) {
    pool_actor pool;
    self->request(handle, 10s, get_pool_atom::value, name)
        .receive([&](pool_actor& p) { pool = p; }, [](caf::error&) { BOOST_FAIL("get_pool"); });
    BOOST_REQUIRE(pool);
    return pool;
  }

  /// Waits for the down message of `pool`, which the test monitors (30 s
  /// safety net); other messages stay in the mailbox.
  void wait_down(const pool_actor& pool, const char* why) {
    for (bool down = false; !down;)
      self->receive(
          [&](caf::down_msg& m) { down = m.source == pool.address(); },
          caf::after(30s) >> [&] { BOOST_FAIL("the policy pool did not go down in 30 s (" << why << ")"); });
  }

  std::vector<std::string> pool_names() {
    std::vector<std::string> names;
    self->request(handle, 10s, status_atom::value)
        .receive(
            [&](std::vector<pool_status>& st) {
              for (auto& p : st)
                names.push_back(p.name);
            },
            [](caf::error&) { BOOST_FAIL("status failed"); });
    return names;
  }

  supervisor_actor handle;
};

bool has_policy_pool(const std::vector<std::string>& names) {
  return std::any_of(names.begin(), names.end(),
                     [](const std::string& n) { return n.rfind("policy-", 0) == 0; });
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(policy_pool_tests, policy_pools_fixture)

BOOST_AUTO_TEST_CASE(a_pool_per_distinct_policy_and_spellings_share_one) {
  host_dir data("alpha");
  policy_pool_config pp;
  pp.bindable_paths = {data.path};
  start(pool_with(R"({"version": 1, "extends": ["default"]})", exec_mode::shared), pp);

  // The default pool does not bind the directory.
  BOOST_TEST(run(read_code(data.path)).stdout_data == "denied 2\n");
  // A: default + read the directory → a pool of its own.
  auto a = run(read_code(data.path), granting({data.path}));
  BOOST_TEST(a.stdout_data == "alpha\n");
  // B: default + uname denied → another.
  auto b = run(uname_code, R"({"version": 1, "extends": ["default"],
                              "antiEscape": {"denySyscalls": ["uname"]}})");
  BOOST_TEST(b.stdout_data == "uname 1\n");
  auto names = pool_names();
  BOOST_REQUIRE_EQUAL(names.size(), 3u);
  BOOST_TEST(names[0] == "default");
  BOOST_TEST(names[1].rfind("policy-", 0) == 0u);
  BOOST_TEST(names[1].size() == std::string("policy-").size() + 12);
  BOOST_TEST(names[2].rfind("policy-", 0) == 0u);

  // A again, written differently: keys reordered, whitespace, permissions
  // in another order, the plugin spelled out. Same pool.
  const std::string a2 = "{\"fs\":{\"rules\":[{\"perms\":[\"read_dir\",\"read_file\"],\"path\":\"" +
                         data.path +
                         "/\",\"action\":\"allow\"}]},\"extends\":[\"default\"],"
                         "\"plugins\":{\"landlock\":{\"enabled\":true,\"best_effort\":false}},"
                         "\"version\":1}";
  auto again = run(read_code(data.path), a2);
  BOOST_TEST(again.stdout_data == "alpha\n");
  BOOST_TEST(pool_names() == names);
  // Both A execs ran in the same pool (its worker 1).
  BOOST_TEST(a.worker_id == again.worker_id);

  // A policy that enforces exactly what the default pool does needs no pool.
  auto same = run("print('same')", R"({"version": 1, "extends": ["default"],
                                       "description": "the default, by another name"})");
  BOOST_TEST(same.stdout_data == "same\n");
  BOOST_TEST(pool_names() == names);
}

BOOST_AUTO_TEST_CASE(the_cap_stops_the_least_recently_used_idle_pool_or_answers_busy) {
  host_dir data("beta");
  policy_pool_config pp;
  pp.bindable_paths = {data.path};
  pp.max_pools = 1;
  start(pool_with(R"({"version": 1, "extends": ["default"]})", exec_mode::shared), pp);
  const std::string a = granting({data.path});
  const std::string b =
      R"({"version": 1, "extends": ["default"], "antiEscape": {"denySyscalls": ["uname"]}})";

  BOOST_TEST(run(read_code(data.path), a).stdout_data == "beta\n");
  auto with_a = pool_names();
  BOOST_REQUIRE_EQUAL(with_a.size(), 2u);
  // B needs a pool; A's is idle and goes.
  BOOST_TEST(run(uname_code, b).stdout_data == "uname 1\n");
  auto with_b = pool_names();
  BOOST_REQUIRE_EQUAL(with_b.size(), 2u);
  BOOST_TEST(with_b[1] != with_a[1]);

  // While B's pool runs an exec, A finds no idle pool to replace: busy.
  exec_request slow;
  // It runs until cancelled: however slow the machine, B's pool is busy
  // when A's request comes.
  slow.code = "import time\ntime.sleep(60)";
  slow.policy = b;
  slow.exec_id = 501;
  self->send(handle, subscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  self->send(handle, exec_atom::value, slow);
  // Wait until B's pool is running it (its worker reports running).
  for (bool running = false; !running;)
    self->receive(
        [&](worker_state_event& ev) {
          running = ev.pool == with_b[1] && ev.state == worker_state::running;
        },
        caf::after(30s) >> [] { BOOST_FAIL("B's pool did not start the exec in 30 s"); });
  self->send(handle, unsubscribe_atom::value, caf::actor_cast<worker_state_listener>(self));
  auto refused = run(read_code(data.path), a);
  BOOST_TEST((refused.error == error_class::busy));
  BOOST_TEST(refused.detail.find("none is idle") != std::string::npos, refused.detail);
  self->request(handle, 10s, cancel_atom::value, uint64_t{501})
      .receive([](cancel_reply& r) { BOOST_TEST((r.outcome == cancel_outcome::cancelled_running)); },
               [&](caf::error& e) { BOOST_FAIL("cancel: " << sys.render(e)); });
  bool got = false;
  while (!got)
    self->receive(
        [&](exec_result& r) {
          got = true;
          BOOST_TEST(r.exec_id == 501u);
          BOOST_TEST((r.error == error_class::cancelled));
        },
        [](worker_state_event&) {}, // sent before the unsubscribe took effect
        caf::after(30s) >> [] { BOOST_FAIL("no result for the cancelled exec in 30 s"); });
  BOOST_TEST(pool_names() == with_b);
}

BOOST_AUTO_TEST_CASE(an_idle_pool_is_stopped_but_never_one_that_is_running) {
  host_dir data("gamma");
  policy_pool_config pp;
  pp.bindable_paths = {data.path};
  pp.idle_timeout_ms = 300;
  start(pool_with(R"({"version": 1, "extends": ["default"]})", exec_mode::shared), pp);
  const std::string a = granting({data.path});
  BOOST_TEST(run(read_code(data.path), a).stdout_data == "gamma\n");
  const auto names = pool_names();
  BOOST_REQUIRE_EQUAL(names.size(), 2u);
  const auto pool = get_pool(names[1]);
  self->monitor(pool);
  // The idle check of that exec comes while the next one runs (1.5 s, five
  // times the idle timeout): the pool must survive it.
  auto slow =
      run("import time\ntime.sleep(1.5)\nprint(open('" + data.path + "/secret.txt').read())", a);
  BOOST_TEST((slow.error == error_class::ok), slow.detail);
  BOOST_TEST(slow.stdout_data == "gamma\n");
  // Idle now: it goes. The supervisor forgets it before it tells it to shut
  // down, so once the pool is down it is no longer listed.
  wait_down(pool, "idle");
  BOOST_TEST(!has_policy_pool(pool_names()));
  // And comes back on demand.
  BOOST_TEST(run(read_code(data.path), a).stdout_data == "gamma\n");
  BOOST_TEST(has_policy_pool(pool_names()));
}

BOOST_AUTO_TEST_CASE(a_crashed_policy_pool_is_dropped_and_started_again_on_demand) {
  host_dir data("kappa");
  policy_pool_config pp;
  pp.bindable_paths = {data.path};
  start(pool_with(R"({"version": 1, "extends": ["default"]})", exec_mode::shared), pp);
  const std::string a = granting({data.path});
  BOOST_TEST(run(read_code(data.path), a).stdout_data == "kappa\n");
  const auto names = pool_names();
  BOOST_REQUIRE_EQUAL(names.size(), 2u);
  const auto pool = get_pool(names[1]);
  self->monitor(pool);
  self->send_exit(pool, caf::exit_reason::kill);
  wait_down(pool, "killed");
  // The supervisor's own down message may be handled just after ours: ask
  // until it has dropped the pool (30 s safety net).
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool gone = false;
  while (!(gone = !has_policy_pool(pool_names())) && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(1ms);
  BOOST_TEST(gone, "the supervisor still lists the killed policy pool after 30 s");
  auto again = run(read_code(data.path), a);
  BOOST_TEST(again.stdout_data == "kappa\n");
  BOOST_TEST(pool_names() == names); // the same name: the same policy
}

BOOST_AUTO_TEST_CASE(invalid_request_policies_are_refused_with_their_pointer) {
  host_dir data("delta");
  policy_pool_config pp;
  pp.bindable_paths = {data.path};
  start(pool_with(R"({"version": 1, "extends": ["default"]})", exec_mode::shared), pp);
  auto refused = [&](const std::string& policy, const std::vector<std::string>& parts) {
    const std::string err = refusal(policy);
    for (const auto& part : parts)
      BOOST_TEST(err.find(part) != std::string::npos, "'" << part << "' not in: " << err);
  };
  refused(R"({"version": 1, "defaults": {"fs": "alow"}})",
          {"invalid request policy", "request policy: /defaults/fs: ", "alow", "schema: enum"});
  refused("{not json", {"invalid request policy", "request policy"});
  refused(R"({"version": 1, "extends": ["../policies/default.json"]})",
          {"request policy: /extends/0", "by name only"});
  refused(R"({"version": 1, "extends": ["no-such-policy"]})", {"/extends/0", "no such policy"});
  refused(granting({"/home"}), {"request policy: /fs/rules/0: ", "/home", "may not bind"});
  // (Without extends: merging with `default` would keep its layer on and
  // its lower limit.)
  refused(R"({"version": 1, "plugins": {"landlock": false}})",
          {"request policy: /plugins/landlock", "(ceiling)"});
  refused(R"({"version": 1, "limits": {"memory_bytes": 1073741824}})",
          {"request policy: /limits/memory_bytes: 1073741824", "(ceiling)"});
  refused(R"({"version": 1, "extends": ["networked"]})", {"request policy: /net", "network"});
  // The supervisor is still up and serves.
  BOOST_TEST(run("print('alive')").stdout_data == "alive\n");
  BOOST_TEST(!has_policy_pool(pool_names()));
}

BOOST_AUTO_TEST_CASE(a_stricter_policy_is_narrowed_on_the_warm_fork_pool) {
  host_dir data("epsilon");
  host_dir other("zeta");
  policy_pool_config pp;
  pp.bindable_paths = {data.path, other.path};
  start(pool_with(granting({data.path}), exec_mode::isolated), pp);

  // The pool's policy lets the code read the directory.
  auto open = run(read_code(data.path));
  BOOST_TEST(open.stdout_data == "epsilon\n");
  BOOST_TEST(open.enforcement.find("\"tightening\"") == std::string::npos);

  // The default policy alone does not: Landlock in the exec's process
  // refuses the open although the pool binds and grants the directory.
  auto narrowed = run(read_code(data.path), R"({"version": 1, "extends": ["default"]})");
  BOOST_TEST((narrowed.error == error_class::ok), narrowed.detail);
  BOOST_TEST(narrowed.stdout_data == "denied 13\n");
  auto report = nlohmann::json::parse(narrowed.enforcement, nullptr, false);
  BOOST_REQUIRE(report.is_object());
  BOOST_REQUIRE(report.contains("tightening"));
  BOOST_TEST(report["tightening"]["landlock"]["enforced"] == true);
  BOOST_TEST(report["tightening"]["policy"].get<std::string>().rfind("policy-", 0) == 0u);
  // It ran on the pool's warm worker: no pool was started.
  BOOST_TEST(!has_policy_pool(pool_names()));
  BOOST_TEST(narrowed.worker_id == open.worker_id);

  // The next exec on the same pool, without the request policy, is not affected.
  BOOST_TEST(run(read_code(data.path)).stdout_data == "epsilon\n");

  // A stricter policy that also denies a system call: the extra seccomp
  // filter in the exec's process.
  auto no_uname =
      run(uname_code, granting({data.path}, R"({"antiEscape": {"denySyscalls": ["uname"]}})"));
  BOOST_TEST(no_uname.stdout_data == "uname 1\n");
  BOOST_TEST(no_uname.enforcement.find("\"tightening\"") != std::string::npos);
  BOOST_TEST(run(uname_code).stdout_data == "uname ok\n");

  // The pool's own policy, written as a request policy: nothing to narrow.
  auto same = run(read_code(data.path), granting({data.path}));
  BOOST_TEST(same.stdout_data == "epsilon\n");
  BOOST_TEST(same.enforcement.find("\"tightening\"") == std::string::npos);
  BOOST_TEST(!has_policy_pool(pool_names()));

  // A looser policy (it also grants a directory the pool does not bind) is
  // not narrowed: it gets a pool of its own, where it can read both.
  auto looser = run(read_code(other.path), granting({data.path, other.path}));
  BOOST_TEST(looser.stdout_data == "zeta\n");
  BOOST_TEST(looser.enforcement.find("\"tightening\"") == std::string::npos);
  BOOST_TEST(has_policy_pool(pool_names()));
}

BOOST_AUTO_TEST_CASE(audit_names_the_request_policy_wherever_it_ran) {
  host_dir data("theta");
  host_dir other("iota");
  const std::string log = "/tmp/castellan-ppool-audit-" + std::to_string(::getpid()) + ".jsonl";
  audit_config audit;
  audit.enabled = true;
  audit.events = {"*"};
  audit.file.path = log;
  audit.file.fsync = fsync_policy::every_record;
  policy_pool_config pp;
  pp.bindable_paths = {data.path, other.path};
  start(pool_with(granting({data.path}), exec_mode::isolated), pp, audit);
  auto narrowed = run("print('n')", R"({"version": 1, "extends": ["default"]})");
  auto own = run("print('o')", granting({data.path, other.path}));
  BOOST_REQUIRE(narrowed.stdout_data == "n\n");
  BOOST_REQUIRE(own.stdout_data == "o\n");
  self->request(handle, 30s, audit_flush_atom::value)
      .receive([](audit_stats&) {}, [](caf::error&) { BOOST_FAIL("audit flush failed"); });
  std::map<uint64_t, nlohmann::json> starts;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("kind", "") == "exec_start")
      starts[j.value("exec_id", uint64_t{0})] = j;
  }
  BOOST_REQUIRE(starts.count(narrowed.exec_id) == 1u);
  BOOST_REQUIRE(starts.count(own.exec_id) == 1u);
  // Narrowed: it ran on the default pool, under the request's policy.
  const auto& n = starts[narrowed.exec_id];
  BOOST_TEST(n["pool"] == "default");
  BOOST_TEST(n["policy"].get<std::string>().rfind("policy-", 0) == 0u);
  // Its own pool: named after the policy, and so is the policy.
  const auto& o = starts[own.exec_id];
  BOOST_TEST(o["pool"].get<std::string>().rfind("policy-", 0) == 0u);
  BOOST_TEST(o["policy"] == o["pool"]);
  BOOST_TEST(o["policy"] != n["policy"]);
  ::unlink(log.c_str());
}

BOOST_AUTO_TEST_CASE(a_pool_narrows_only_in_isolated_mode_and_within_its_ring) {
  // Straight to pools, as an embedder holding a pool handle could.
  auto reuse_cfg = test_pool(1);
  reuse_cfg.mode = exec_mode::shared;
  auto reuse = spawn_pool(sys, reuse_cfg);
  BOOST_REQUIRE(reuse);
  exec_request req;
  req.code = "print('ran')";
  req.tightening = R"({"version": 1})";
  std::string err;
  self->request(*reuse, 30s, exec_atom::value, req)
      .receive([](exec_result&) {}, [&](caf::error& e) { err = sys.render(e); });
  BOOST_TEST(err.find("can narrow only code requests in isolated mode") != std::string::npos, err);
  caf::anon_send(*reuse, shutdown_atom::value);

  auto fork_cfg = test_pool(1);
  fork_cfg.mode = exec_mode::isolated;
  fork_cfg.ring_capacity = 8192;
  fork_cfg.code_limit = 4096;
  auto fork = spawn_pool(sys, fork_cfg);
  BOOST_REQUIRE(fork);
  req.code = "print('ran')  # " + std::string(4000, 'x');
  req.tightening = std::string(5000, ' ') + R"({"version": 1})";
  auto r = exec(*fork, req);
  BOOST_TEST((r.error == error_class::limit_exceeded));
  BOOST_TEST(r.detail.find("the ring holds 8192") != std::string::npos, r.detail);
  BOOST_TEST(r.stdout_data.empty());
  caf::anon_send(*fork, shutdown_atom::value);
}

BOOST_AUTO_TEST_CASE(a_client_cannot_send_its_own_tightening) {
  host_dir data("eta");
  policy_pool_config pp;
  start(pool_with(granting({data.path}), exec_mode::isolated), pp);
  // Whatever a client puts in the fields the supervisor owns is replaced:
  // here a bogus tightening would refuse the request; it runs normally.
  exec_request req;
  req.code = read_code(data.path);
  req.tightening = "{\"version\": 1}";
  req.policy_name = "forged";
  auto r = exec(handle, req, 60s);
  BOOST_TEST(r.stdout_data == "eta\n");
  BOOST_TEST(r.enforcement.find("\"tightening\"") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
