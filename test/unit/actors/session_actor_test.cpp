#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "actors/errors.hpp"
#include "support/actor_system_fixture.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"
#include "support/workspace_support.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct session_fixture : test::actor_system_fixture {
  supervisor_actor start(session_limits limits = {}, std::optional<audit_config> audit = {}) {
    supervisor_config sc;
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    sc.pools = {pc};
    sc.sessions = limits;
    sc.audit = std::move(audit);
    auto sup = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(sup, (sup ? "" : sup.error().describe()));
    handle = *sup;
    return handle;
  }

  /// With a workspace store in `dir` (`ws` its settings, the directory set here).
  supervisor_actor start_with_store(const std::string& dir, workspace_config ws = {},
                                    session_limits limits = {}) {
    supervisor_config sc;
    auto pc = test_pool(1);
    pc.mode = exec_mode::shared;
    sc.pools = {pc};
    sc.sessions = limits;
    ws.store.directory = dir;
    sc.workspaces = ws;
    auto sup = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(sup, (sup ? "" : sup.error().describe()));
    handle = *sup;
    return handle;
  }

  caf::expected<workspace_info> ws_create(const std::string& name, uint64_t quota) {
    caf::expected<workspace_info> out{caf::error{}};
    self->request(handle, 60s, workspace_create_atom::value, name, quota)
      .receive([&](workspace_info& w) { out = std::move(w); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  caf::expected<workspace_info> ws_remove(const std::string& name) {
    caf::expected<workspace_info> out{caf::error{}};
    self->request(handle, 60s, workspace_remove_atom::value, name)
      .receive([&](workspace_info& w) { out = std::move(w); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  std::vector<workspace_info> ws_list() {
    std::vector<workspace_info> out;
    self->request(handle, 60s, workspace_list_atom::value)
      .receive([&](std::vector<workspace_info>& xs) { out = std::move(xs); },
               [&](caf::error& err) { BOOST_FAIL("workspace list: " << describe(err, sys)); });
    return out;
  }

  ~session_fixture() {
    if (handle)
      caf::anon_send(handle, shutdown_atom::value);
  }

  /// Creates a session, or the error the supervisor answered.
  caf::expected<session_info> try_create(session_options opts) {
    caf::expected<session_info> out{caf::error{}};
    self->request(handle, 60s, session_create_atom::value, std::move(opts))
      .receive([&](session_info& info) { out = std::move(info); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  session_info create(session_options opts = {}) {
    auto info = try_create(std::move(opts));
    BOOST_REQUIRE_MESSAGE(info, (info ? "" : describe(info.error(), sys)));
    BOOST_REQUIRE(info->id.rfind("s-", 0) == 0u);
    owners[info->id] = info->owner;
    return *info;
  }

  /// Session `id` as its owner names it (the owner create() saw).
  session_ref ref(const std::string& id) { return session_ref{id, owners[id]}; }

  /// An exec in session `id` through the supervisor, or its error.
  caf::expected<exec_result> try_exec(const std::string& id, exec_request req) {
    caf::expected<exec_result> out{caf::error{}};
    self->request(handle, 60s, exec_atom::value, ref(id), std::move(req))
      .receive([&](exec_result& r) { out = std::move(r); },
               [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  exec_result run_code(const std::string& id, std::string code) {
    exec_request req;
    req.code = std::move(code);
    auto r = try_exec(id, std::move(req));
    BOOST_REQUIRE_MESSAGE(r, (r ? "" : describe(r.error(), sys)));
    return *r;
  }

  session_stats stats(const std::string& id) {
    session_stats out;
    bool got = false;
    self->request(handle, 30s, status_atom::value, ref(id))
      .receive(
        [&](session_stats& s) {
          out = std::move(s);
          got = true;
        },
        [&](caf::error& err) { BOOST_FAIL("stats: " << describe(err, sys)); });
    BOOST_REQUIRE(got);
    return out;
  }

  session_stats destroy(const std::string& id) {
    session_stats out;
    bool got = false;
    self->request(handle, 30s, destroy_atom::value, ref(id))
      .receive(
        [&](session_stats& s) {
          out = std::move(s);
          got = true;
        },
        [&](caf::error& err) { BOOST_FAIL("destroy: " << describe(err, sys)); });
    BOOST_REQUIRE(got);
    return out;
  }

  std::vector<session_info> list() {
    std::vector<session_info> out;
    self->request(handle, 30s, session_list_atom::value)
      .receive([&](std::vector<session_info>& xs) { out = std::move(xs); },
               [&](caf::error& err) { BOOST_FAIL("list: " << describe(err, sys)); });
    return out;
  }

  bool listed(const std::string& id) {
    for (const auto& s : list())
      if (s.id == id)
        return true;
    return false;
  }

  castellan_errc code_of(const caf::error& err) {
    BOOST_REQUIRE(err.category() == caf::detail::error_factory<castellan_errc>::category);
    return static_cast<castellan_errc>(err.code());
  }

  supervisor_actor handle;
  std::map<std::string, std::string> owners;
};

/// The cgroup directories of process `pid`, from /proc/PID/cgroup and the
/// mounts under /sys/fs/cgroup (v1: one per controller; v2: the unified one).
std::vector<std::string> cgroup_dirs_of(pid_t pid) {
  std::vector<std::string> out;
  std::ifstream in("/proc/" + std::to_string(pid) + "/cgroup");
  for (std::string line; std::getline(in, line);) {
    const auto a = line.find(':');
    const auto b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos)
      continue;
    std::string controllers = line.substr(a + 1, b - a - 1);
    const std::string path = line.substr(b + 1);
    if (path == "/" || controllers.empty() || controllers.rfind("name=", 0) == 0)
      continue;
    // "cpu,cpuacct" is mounted at /sys/fs/cgroup/cpu,cpuacct.
    const std::string dir = "/sys/fs/cgroup/" + controllers + path;
    struct stat st {};
    if (::stat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      out.push_back(dir);
  }
  return out;
}

bool dir_exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

std::vector<nlohmann::json> session_records(const std::string& log, const std::string& id) {
  std::vector<nlohmann::json> out;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.value("kind", "") == "session" && j.value("session", "") == id)
      out.push_back(j);
  }
  return out;
}

} // namespace

BOOST_FIXTURE_TEST_SUITE(session_tests, session_fixture)

BOOST_AUTO_TEST_CASE(state_persists_across_execs_and_not_across_sessions) {
  start();
  auto a = create();
  auto b = create();
  BOOST_TEST(a.id != b.id);
  auto def = run_code(a.id, "def twice(x):\n    return 2 * x\ny = 21\n");
  BOOST_TEST(def.exit_code == 0);
  auto use = run_code(a.id, "print(twice(y))");
  BOOST_TEST((use.error == error_class::ok));
  BOOST_TEST(use.stdout_data == "42\n");
  // The other session has none of it.
  auto other = run_code(b.id, "print('twice' in globals(), 'y' in globals())");
  BOOST_TEST(other.stdout_data == "False False\n");
  auto raises = run_code(b.id, "twice(1)");
  BOOST_TEST((raises.error == error_class::exception));
  BOOST_TEST(raises.exception.type == "NameError");
  // Still there after an exception in the first one.
  run_code(a.id, "raise ValueError('x')");
  BOOST_TEST(run_code(a.id, "print(y)").stdout_data == "21\n");
  // Straight to the session's handle, the same state.
  session_actor direct;
  self->request(handle, 10s, session_get_atom::value, ref(a.id))
    .receive([&](session_actor& s) { direct = s; },
             [&](caf::error& err) { BOOST_FAIL("get: " << describe(err, sys)); });
  BOOST_REQUIRE(direct);
  exec_request req;
  req.code = "y += 1\nprint(twice(y))";
  BOOST_TEST(exec(direct, req).stdout_data == "44\n");
}

BOOST_AUTO_TEST_CASE(cwd_env_and_files_persist_and_commands_see_them) {
  start();
  auto s = create();
  auto first = run_code(s.id, "import os\n"
                              "os.makedirs('/tmp/work', exist_ok=True)\n"
                              "os.chdir('/tmp/work')\n"
                              "os.environ['GREETING'] = 'hello'\n"
                              "open('/tmp/note.txt', 'w').write('from python\\n')\n");
  BOOST_REQUIRE(first.exit_code == 0);
  auto second = run_code(s.id, "import os\nprint(os.getcwd(), os.environ.get('GREETING'))");
  BOOST_TEST(second.stdout_data == "/tmp/work hello\n");
  // A command runs in the same root, in that cwd, with that environment.
  exec_request cmd;
  cmd.argv = {"/bin/sh", "-c", "pwd; echo \"$GREETING\"; cat /tmp/note.txt"};
  auto ran = try_exec(s.id, cmd);
  BOOST_REQUIRE_MESSAGE(ran, (ran ? "" : describe(ran.error(), sys)));
  BOOST_TEST(ran->exit_code == 0);
  BOOST_TEST(ran->stdout_data == "/tmp/work\nhello\nfrom python\n");
  // What the command wrote, the next exec reads.
  cmd.argv = {"/bin/sh", "-c", "echo from sh > /tmp/work/sh.txt"};
  BOOST_REQUIRE(try_exec(s.id, cmd));
  BOOST_TEST(run_code(s.id, "print(open('sh.txt').read(), end='')").stdout_data == "from sh\n");
  // A request's own variables and cwd are applied and kept like the code's.
  exec_request with_env;
  with_env.code = "import os\nprint(os.environ['MODE'], os.getcwd())";
  with_env.env = {"MODE=fast"};
  with_env.cwd = "/tmp";
  BOOST_TEST(try_exec(s.id, with_env)->stdout_data == "fast /tmp\n");
  BOOST_TEST(run_code(s.id, "import os\nprint(os.environ.get('MODE'), os.getcwd())").stdout_data ==
             "fast /tmp\n");
}

BOOST_AUTO_TEST_CASE(output_streams_to_the_sink_as_for_pools) {
  start();
  auto s = create();
  exec_request req;
  req.code = "print('one')\nprint('two')";
  req.output_sink = caf::actor_cast<caf::actor>(self);
  auto r = try_exec(s.id, req);
  BOOST_REQUIRE(r);
  BOOST_TEST(r->stdout_data == "one\ntwo\n");
  std::string streamed;
  for (bool more = true; more;)
    self->receive([&](exec_output_atom, exec_output& piece) { streamed += piece.data; },
                  caf::after(0s) >> [&] { more = false; });
  BOOST_TEST(streamed == "one\ntwo\n");
}

BOOST_AUTO_TEST_CASE(stats_come_from_the_cgroup_and_destroy_frees_it) {
  start();
  auto s = create();
  run_code(s.id, "data = bytearray(8 << 20)\nsum(range(200000))");
  auto st = stats(s.id);
  BOOST_TEST(st.info.id == s.id);
  BOOST_TEST((st.state == session_state::ready));
  BOOST_TEST(st.execs == 1u);
  BOOST_REQUIRE(st.worker.pid > 0);
  BOOST_REQUIRE(st.worker.has_cgroup);
  BOOST_TEST(st.worker.memory_bytes >= (8u << 20));
  BOOST_TEST(st.worker.pids >= 2u); // castellan-worker and the interpreter
  BOOST_TEST(st.worker.cpu_us > 0u);
  const pid_t pid = st.worker.pid;
  const auto dirs = cgroup_dirs_of(pid);
  BOOST_REQUIRE(!dirs.empty());
  auto last = destroy(s.id);
  BOOST_TEST(last.info.id == s.id);
  BOOST_TEST(last.end_reason == "destroyed by its client");
  // Gone when destroy answered: the process (reaped, so not even a zombie)
  // and every cgroup directory it had.
  BOOST_TEST(::kill(pid, 0) == -1);
  for (const auto& d : dirs)
    BOOST_TEST(!dir_exists(d), d);
  BOOST_TEST(!listed(s.id));
  auto after = try_exec(s.id, exec_request{});
  BOOST_REQUIRE(!after);
  BOOST_TEST((code_of(after.error()) == castellan_errc::no_such_session));
}

BOOST_AUTO_TEST_CASE(the_reaper_ends_an_idle_session_and_audits_it) {
  const std::string log = "/tmp/castellan-session-audit-" + std::to_string(::getpid()) + ".jsonl";
  ::unlink(log.c_str());
  audit_config audit;
  audit.file.path = log;
  audit.file.fsync = fsync_policy::every_record;
  start({}, audit);
  session_options opts;
  opts.owner = "alice";
  opts.idle_ttl_ms = 600000;
  auto busy = create(opts);
  opts.idle_ttl_ms = 300;
  auto idle = create(opts);
  BOOST_TEST(idle.idle_ttl_ms == 300u);
  // No timing assertion: wait (bounded) until the reaper took it.
  for (int i = 0; i < 600 && listed(idle.id); ++i)
    std::this_thread::sleep_for(50ms);
  BOOST_REQUIRE(!listed(idle.id));
  BOOST_TEST(listed(busy.id)); // the other one, with a long TTL, stays
  auto gone = try_exec(idle.id, exec_request{});
  BOOST_REQUIRE(!gone);
  BOOST_TEST((code_of(gone.error()) == castellan_errc::no_such_session));
  self->request(handle, 30s, audit_flush_atom::value)
    .receive([](audit_stats&) {}, [](caf::error&) { BOOST_FAIL("audit flush failed"); });
  auto records = session_records(log, idle.id);
  std::set<std::string> events;
  for (const auto& r : records) {
    events.insert(r.value("event", ""));
    BOOST_TEST(r.value("owner", "") == "alice");
    BOOST_TEST(r.value("pool", "") == "default");
  }
  BOOST_TEST(events.count("created") == 1u);
  BOOST_TEST(events.count("reaped") == 1u);
  for (const auto& r : records)
    if (r.value("event", "") == "reaped")
      BOOST_TEST(r.value("reason", "").find("idle TTL 300 ms") != std::string::npos);
  ::unlink(log.c_str());
}

BOOST_AUTO_TEST_CASE(the_maximum_lifetime_ends_a_session_in_use) {
  start();
  session_options opts;
  opts.max_lifetime_ms = 500;
  auto s = create(opts);
  // Busy the whole time: the lifetime, not the idle TTL, ends it.
  const auto give_up = std::chrono::steady_clock::now() + 60s;
  while (listed(s.id) && std::chrono::steady_clock::now() < give_up) {
    exec_request req;
    req.code = "import time\ntime.sleep(0.02)";
    (void)try_exec(s.id, req);
  }
  BOOST_TEST(!listed(s.id));
}

BOOST_AUTO_TEST_CASE(limits_answer_busy) {
  session_limits limits;
  limits.max_sessions = 2;
  limits.max_per_owner = 1;
  start(limits);
  session_options a;
  a.owner = "a";
  session_options b;
  b.owner = "b";
  session_options c;
  c.owner = "c";
  auto first = create(a);
  auto again = try_create(a);
  BOOST_REQUIRE(!again);
  BOOST_TEST((code_of(again.error()) == castellan_errc::busy));
  BOOST_TEST(describe(again.error(), sys).find("maximum per owner (1)") != std::string::npos);
  create(b);
  auto third = try_create(c);
  BOOST_REQUIRE(!third);
  BOOST_TEST((code_of(third.error()) == castellan_errc::busy));
  BOOST_TEST(describe(third.error(), sys).find("the maximum (2)") != std::string::npos);
  destroy(first.id);
  create(c); // room again
  // A TTL above the maximum is refused, not cut.
  session_options greedy;
  greedy.owner = "d";
  greedy.idle_ttl_ms = limits.max_idle_ttl_ms + 1;
  destroy(list().front().id);
  auto refused = try_create(greedy);
  BOOST_REQUIRE(!refused);
  BOOST_TEST((code_of(refused.error()) == castellan_errc::invalid_request));
}

BOOST_AUTO_TEST_CASE(a_session_counts_until_its_worker_is_gone) {
  session_limits limits;
  limits.max_sessions = 2;
  limits.max_per_owner = 2;
  start(limits);
  session_options opts;
  opts.owner = "racer";
  std::map<std::string, pid_t> live; // created, not yet destroyed: id → worker pid
  std::vector<pid_t> destroyed;      // workers of sessions whose destroy was sent
  auto track = [&](const session_info& info) {
    owners[info.id] = info.owner;
    const pid_t pid = stats(info.id).worker.pid;
    BOOST_REQUIRE(pid > 0);
    live[info.id] = pid;
  };
  track(create(opts));
  track(create(opts));
  std::size_t admitted = 0;
  std::size_t refused = 0;
  for (int round = 0; round < 12; ++round) {
    // Destroys and creates sent back to back: the supervisor handles the
    // creates while the destroyed sessions' workers are still being killed.
    using destroy_handle = decltype(self->request(handle, 60s, destroy_atom::value, ref("")));
    using create_handle =
      decltype(self->request(handle, 60s, session_create_atom::value, session_options{}));
    std::vector<destroy_handle> destroys;
    for (const auto& [id, pid] : live) {
      destroys.push_back(self->request(handle, 60s, destroy_atom::value, ref(id)));
      destroyed.push_back(pid);
    }
    live.clear();
    std::vector<create_handle> creates;
    for (int i = 0; i < 3; ++i)
      creates.push_back(self->request(handle, 60s, session_create_atom::value, opts));
    std::size_t admitted_now = 0;
    for (auto& c : creates)
      c.receive(
        [&](session_info& info) {
          ++admitted;
          ++admitted_now;
          // Admitted only once every destroyed session's worker is gone.
          for (pid_t pid : destroyed)
            BOOST_TEST(::kill(pid, 0) == -1, "pid " << pid << " of a destroyed session lives");
          track(info);
          BOOST_TEST(live.size() <= limits.max_sessions);
        },
        [&](caf::error& err) {
          ++refused;
          BOOST_TEST((code_of(err) == castellan_errc::busy), describe(err, sys));
        });
    for (auto& d : destroys)
      d.receive([](session_stats&) {},
                [&](caf::error& err) { BOOST_FAIL("destroy: " << describe(err, sys)); });
    // Creates handled right after the destroys: the destroyed sessions still
    // counted (their workers were being killed), so none was admitted; with
    // no destroy before them, the limit admits two of the three.
    BOOST_TEST(admitted_now == (destroys.empty() ? 2u : 0u), "round " << round);
    // The supervisor's own count never goes above the limit either.
    BOOST_TEST(list().size() <= limits.max_sessions);
  }
  BOOST_TEST(admitted == 12u);
  BOOST_TEST(refused == 24u);
  for (const auto& [id, pid] : live)
    destroy(id);
  // With every destroy answered there is room again, at once.
  track(create(opts));
  track(create(opts));
}

BOOST_AUTO_TEST_CASE(a_timeout_ends_the_session_clearly) {
  start();
  auto s = create();
  run_code(s.id, "state = 'kept'");
  exec_request spin;
  spin.code = "while True:\n    pass";
  spin.timeout_ms = 300;
  auto r = try_exec(s.id, spin);
  BOOST_REQUIRE(r);
  BOOST_TEST((r->error == error_class::timeout));
  BOOST_TEST(r->exit_code == 124);
  BOOST_TEST(r->detail.find("session " + s.id + " ended with its worker") != std::string::npos,
             r->detail);
  // From then on: session_ended, with the reason, until it is destroyed.
  auto next = try_exec(s.id, exec_request{});
  BOOST_REQUIRE(!next);
  BOOST_TEST((code_of(next.error()) == castellan_errc::session_ended));
  BOOST_TEST(describe(next.error(), sys).find("timeout") != std::string::npos);
  auto st = stats(s.id);
  BOOST_TEST((st.state == session_state::ended));
  BOOST_TEST(st.worker.pid == 0);
  BOOST_TEST(st.end_reason.find("killed by exec") != std::string::npos);
  BOOST_TEST(listed(s.id)); // it still counts until destroyed (or reaped)
  destroy(s.id);
  BOOST_TEST(!listed(s.id));
}

BOOST_AUTO_TEST_CASE(a_worker_killed_while_idle_ends_the_session) {
  start();
  auto s = create();
  run_code(s.id, "kept = True");
  const pid_t pid = stats(s.id).worker.pid;
  BOOST_REQUIRE(pid > 0);
  BOOST_REQUIRE(::kill(pid, SIGKILL) == 0);
  // Bounded wait for the session to learn it (no timing assertion).
  for (int i = 0; i < 600 && stats(s.id).state != session_state::ended; ++i)
    std::this_thread::sleep_for(50ms);
  auto st = stats(s.id);
  BOOST_TEST((st.state == session_state::ended));
  BOOST_TEST(st.end_reason.find("its worker stopped") != std::string::npos, st.end_reason);
  auto next = try_exec(s.id, exec_request{});
  BOOST_REQUIRE(!next);
  BOOST_TEST((code_of(next.error()) == castellan_errc::session_ended));
}

BOOST_AUTO_TEST_CASE(a_request_policy_is_refused) {
  start();
  auto s = create();
  exec_request req;
  req.code = "print(1)";
  req.policy = R"({"version": 1})";
  auto r = try_exec(s.id, req);
  BOOST_REQUIRE(!r);
  BOOST_TEST((code_of(r.error()) == castellan_errc::invalid_request));
  BOOST_TEST(run_code(s.id, "print(2)").stdout_data == "2\n");
}

BOOST_AUTO_TEST_CASE(a_thread_left_running_keeps_the_worker) {
  start();
  auto s = create();
  run_code(s.id, "import threading, time\n"
                 "ticks = []\n"
                 "t = threading.Thread(target=lambda: [ticks.append(1) or time.sleep(0.01) "
                 "for _ in range(10**6)], daemon=True)\n"
                 "t.start()");
  // A stateless pool would replace this worker; a session keeps it.
  auto r = run_code(s.id, "print(t.is_alive(), len(ticks) > 0)");
  BOOST_TEST(r.stdout_data == "True True\n");
}

BOOST_AUTO_TEST_CASE(the_workspace_is_bound_writable_at_slash_workspace) {
  if (auto why = test::workspace_kernel_lacks())
    return test::skip(*why);
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  start_with_store(tmp.file("workspaces"));
  auto made = ws_create("notes", 16u << 20);
  BOOST_REQUIRE_MESSAGE(made, (made ? "" : describe(made.error(), sys)));
  BOOST_TEST(made->quota_bytes == (16u << 20));
  BOOST_TEST(made->image_bytes >= made->quota_bytes); // allocated whole, not sparse
  BOOST_TEST(!made->mounted);
  session_options opts;
  opts.workspace = "notes";
  auto s = create(opts);
  BOOST_TEST(s.workspace == "notes");
  auto r = run_code(s.id, "import os\n"
                          "print(os.getcwd())\n"
                          "open('/workspace/result.txt', 'w').write('written inside')\n");
  BOOST_TEST(r.exit_code == 0, r.stderr_data);
  BOOST_TEST(r.stdout_data == "/workspace\n");
  // The host's mount is nosymfollow; the sandbox's bind is not: its links
  // resolve inside its own root.
  auto link = run_code(s.id, "import os\n"
                             "os.symlink('result.txt', '/workspace/link')\n"
                             "print(open('/workspace/link').read())\n");
  BOOST_TEST(link.stdout_data == "written inside\n", link.stderr_data);
  auto listed_ws = ws_list();
  BOOST_REQUIRE_EQUAL(listed_ws.size(), 1u);
  BOOST_TEST(listed_ws.front().mounted);
  BOOST_TEST(listed_ws.front().users == 1u);
  // Removing it while the session binds it is refused, clearly.
  auto busy = ws_remove("notes");
  BOOST_REQUIRE(!busy);
  BOOST_TEST((code_of(busy.error()) == castellan_errc::workspace_in_use));
  BOOST_TEST(describe(busy.error(), sys).find("workspace 'notes' is in use") != std::string::npos,
             describe(busy.error(), sys));
  destroy(s.id);
  // The lease went with the session, and the mount with the last lease.
  listed_ws = ws_list();
  BOOST_REQUIRE_EQUAL(listed_ws.size(), 1u);
  BOOST_TEST(listed_ws.front().users == 0u);
  BOOST_TEST(!listed_ws.front().mounted);
  // The files outlive the session: the next one reads them.
  auto again = create(opts);
  BOOST_TEST(run_code(again.id, "print(open('result.txt').read())").stdout_data ==
             "written inside\n");
  destroy(again.id);
  // Free once the destroy answered: no wait.
  auto removed = ws_remove("notes");
  BOOST_REQUIRE_MESSAGE(removed, (removed ? "" : describe(removed.error(), sys)));
  BOOST_TEST(removed->name == "notes");
  BOOST_TEST(ws_list().empty());
  auto gone = try_create(opts);
  BOOST_REQUIRE(!gone);
  BOOST_TEST((code_of(gone.error()) == castellan_errc::no_such_workspace));
  BOOST_TEST(list().empty());
}

BOOST_AUTO_TEST_CASE(workspace_requests_are_checked_and_capped) {
  if (auto why = test::workspace_kernel_lacks())
    return test::skip(*why);
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  workspace_config ws;
  ws.store.max_workspaces = 2;
  ws.default_quota_bytes = 8u << 20;
  ws.max_quota_bytes = 16ull << 40;
  start_with_store(tmp.file("workspaces"), ws);
  for (const std::string name : {"../x", "a/b", ".", "", "Upper"}) {
    auto bad = ws_create(name, 0);
    BOOST_REQUIRE(!bad);
    BOOST_TEST((code_of(bad.error()) == castellan_errc::invalid_request), name);
  }
  auto a = ws_create("a", 0);
  BOOST_REQUIRE_MESSAGE(a, (a ? "" : describe(a.error(), sys)));
  BOOST_TEST(a->quota_bytes == (8u << 20)); // the default
  auto twice = ws_create("a", 0);
  BOOST_REQUIRE(!twice);
  BOOST_TEST((code_of(twice.error()) == castellan_errc::workspace_exists));
  // More than the disk has: refused at create, saying where and how much.
  auto huge = ws_create("huge", 15ull << 40);
  BOOST_REQUIRE(!huge);
  BOOST_TEST((code_of(huge.error()) == castellan_errc::no_space));
  const auto why = describe(huge.error(), sys);
  BOOST_TEST(why.find(tmp.path.string()) != std::string::npos, why);
  BOOST_TEST(why.find("bytes free") != std::string::npos, why);
  BOOST_TEST(why.find(std::to_string(15ull << 40)) != std::string::npos, why);
  BOOST_REQUIRE(ws_create("b", 0));
  auto third = ws_create("c", 0);
  BOOST_REQUIRE(!third);
  BOOST_TEST((code_of(third.error()) == castellan_errc::busy));
  BOOST_TEST(ws_list().size() == 2u);
  auto missing = ws_remove("nope");
  BOOST_REQUIRE(!missing);
  BOOST_TEST((code_of(missing.error()) == castellan_errc::no_such_workspace));
  BOOST_REQUIRE(ws_remove("a"));
  BOOST_REQUIRE(ws_remove("b"));
}

BOOST_AUTO_TEST_CASE(a_workspace_must_be_a_name_of_the_store) {
  start(); // no store
  session_options opts;
  opts.pool = "nope";
  auto r = try_create(opts);
  BOOST_REQUIRE(!r);
  BOOST_TEST((code_of(r.error()) == castellan_errc::no_such_pool));
  opts.pool.clear();
  // Paths are names no workspace has: refused before anything is opened.
  for (const std::string path : {"relative/dir", "/etc", "/tmp", "../x", "..", "."}) {
    opts.workspace = path;
    r = try_create(opts);
    BOOST_REQUIRE(!r);
    BOOST_TEST((code_of(r.error()) == castellan_errc::invalid_request), path);
  }
  opts.workspace = "notes";
  r = try_create(opts);
  BOOST_REQUIRE(!r);
  BOOST_TEST((code_of(r.error()) == castellan_errc::workspaces_disabled));
  auto ws = ws_create("notes", 0);
  BOOST_REQUIRE(!ws);
  BOOST_TEST((code_of(ws.error()) == castellan_errc::workspaces_disabled));
  BOOST_TEST(list().empty());
}

BOOST_AUTO_TEST_CASE(another_owners_session_is_answered_as_none) {
  start();
  session_options opts;
  opts.owner = "alice";
  auto s = create(opts);
  const session_ref as_bob{s.id, "bob"};
  const session_ref unknown{"s-0000000000000000", "bob"};
  auto message_of = [&](const caf::error& err) {
    BOOST_TEST((code_of(err) == castellan_errc::no_such_session));
    // The same words as for an id that does not exist, but for the id.
    auto text = describe(err, sys);
    auto at = text.find(s.id);
    return at == std::string::npos ? text : text.replace(at, s.id.size(), unknown.id);
  };
  auto answer = [&](const session_ref& who) {
    std::vector<std::string> out;
    self->request(handle, 30s, exec_atom::value, who, exec_request{})
      .receive([&](exec_result&) { out.push_back("exec answered"); },
               [&](caf::error& err) { out.push_back(message_of(err)); });
    self->request(handle, 30s, status_atom::value, who)
      .receive([&](session_stats&) { out.push_back("status answered"); },
               [&](caf::error& err) { out.push_back(message_of(err)); });
    self->request(handle, 30s, session_get_atom::value, who)
      .receive([&](session_actor&) { out.push_back("get answered"); },
               [&](caf::error& err) { out.push_back(message_of(err)); });
    self->request(handle, 30s, destroy_atom::value, who)
      .receive([&](session_stats&) { out.push_back("destroy answered"); },
               [&](caf::error& err) { out.push_back(message_of(err)); });
    return out;
  };
  BOOST_TEST(answer(as_bob) == answer(unknown));
  BOOST_TEST(answer(as_bob).front() != "exec answered");
  // Bob's list does not show it; alice's does; the session is untouched.
  std::vector<session_info> bobs{session_info{}};
  self->request(handle, 30s, session_list_atom::value, std::string("bob"))
    .receive([&](std::vector<session_info>& xs) { bobs = std::move(xs); },
             [&](caf::error& err) { BOOST_FAIL("list: " << describe(err, sys)); });
  BOOST_TEST(bobs.empty());
  std::vector<session_info> alices;
  self->request(handle, 30s, session_list_atom::value, std::string("alice"))
    .receive([&](std::vector<session_info>& xs) { alices = std::move(xs); },
             [&](caf::error& err) { BOOST_FAIL("list: " << describe(err, sys)); });
  BOOST_REQUIRE_EQUAL(alices.size(), 1u);
  BOOST_TEST(alices.front().id == s.id);
  BOOST_TEST(run_code(s.id, "print('still here')").stdout_data == "still here\n");
  destroy(s.id);
}

BOOST_AUTO_TEST_CASE(a_timeout_while_a_workspace_file_is_written_leaves_its_old_content) {
  if (auto why = test::workspace_kernel_lacks())
    return test::skip(*why);
  test::temp_dir tmp;
  test::mount_sweeper sweeper{tmp.path.string()};
  start_with_store(tmp.file("workspaces"));
  auto made = ws_create("data", 64u << 20);
  BOOST_REQUIRE_MESSAGE(made, (made ? "" : describe(made.error(), sys)));
  session_options opts;
  opts.workspace = "data";
  auto s = create(opts);
  // The modes of open() keep their meaning: append and update start from
  // the file, 'x' refuses an existing one.
  auto first = run_code(s.id, "import os, pathlib\n"
                              "open('big.bin', 'wb').write(b'old' * 1000)\n"
                              "with open('log.txt', 'w') as f: f.write('a')\n"
                              "os.chmod('log.txt', 0o640)\n"
                              "with open('log.txt', 'a') as f: f.write('b')\n"
                              "with open('log.txt', 'r+') as f: f.write('A')\n"
                              "pathlib.Path('p.txt').write_text('path')\n"
                              "try:\n"
                              "    open('log.txt', 'x')\n"
                              "except FileExistsError:\n"
                              "    print('exists')\n"
                              "print(open('log.txt').read(), open('p.txt').read(), "
                              "os.stat('big.bin').st_size, oct(os.stat('log.txt').st_mode & 0o777))\n");
  BOOST_TEST(first.exit_code == 0, first.stderr_data);
  BOOST_TEST(first.stdout_data == "exists\nAb path 3000 0o640\n");
  // Killed by its timeout while it writes the file (8 MiB written, the
  // rest never comes).
  exec_request slow;
  slow.code = "import time\n"
              "f = open('big.bin', 'wb')\n"
              "for _ in range(8):\n"
              "    f.write(b'new' * (1 << 20))\n"
              "f.flush()\n"
              "print('written', flush=True)\n"
              "time.sleep(60)\n";
  slow.timeout_ms = 3000;
  auto killed = try_exec(s.id, slow);
  BOOST_REQUIRE(killed);
  BOOST_TEST((killed->error == error_class::timeout));
  BOOST_TEST(killed->stdout_data == "written\n");
  destroy(s.id);
  // The next session finds the old content, and nothing else.
  auto next = create(opts);
  auto after = run_code(next.id, "import os\n"
                                 "print(open('big.bin', 'rb').read() == b'old' * 1000, "
                                 "sorted(os.listdir('.')))\n");
  BOOST_TEST(after.exit_code == 0, after.stderr_data);
  BOOST_TEST(after.stdout_data == "True ['big.bin', 'log.txt', 'lost+found', 'p.txt']\n");
  destroy(next.id);
}

BOOST_AUTO_TEST_SUITE_END()
