// Session probes: hostile code in one session's worker against another
// session's worker (processes, /proc, files), through the real supervisor
// under policies/default.json (strict.json runs no program, and the probe
// needs one left running with a marker on its command line).

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <sstream>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;
using namespace std::chrono_literals;

namespace {

struct sessions_under_default : test::actor_system_fixture {
  supervisor_actor sup;

  sessions_under_default() {
    auto pc = test_pool(1);
    const std::string dir = test::source_dir() + "/policies";
    auto doc = policy::load_policy(dir + "/default.json", dir);
    BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : doc.to_failure().describe()));
    auto ok = apply_policy(*doc, pc);
    BOOST_REQUIRE_MESSAGE(ok, (ok ? "" : ok.error().describe()));
    pc.mode = exec_mode::shared;
    supervisor_config sc;
    sc.pools = {pc};
    auto s = spawn_supervisor(sys, sc);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    sup = *s;
  }
  ~sessions_under_default() { caf::anon_send(sup, shutdown_atom::value); }

  std::string create() {
    std::string id;
    self->request(sup, 60s, session_create_atom::value, session_options{})
      .receive([&](session_info& info) { id = info.id; },
               [&](caf::error& err) { BOOST_FAIL("create: " << describe(err, sys)); });
    return id;
  }

  exec_result run(const std::string& id, std::string code) {
    exec_request req;
    req.code = std::move(code);
    exec_result out;
    self->request(sup, 60s, exec_atom::value, session_ref{id, {}}, std::move(req))
      .receive([&](exec_result& r) { out = std::move(r); },
               [&](caf::error& err) { BOOST_FAIL("exec: " << describe(err, sys)); });
    return out;
  }

  int32_t worker_pid(const std::string& id) {
    int32_t pid = 0;
    self->request(sup, 30s, status_atom::value, session_ref{id, {}})
      .receive([&](session_stats& s) { pid = s.worker.pid; },
               [&](caf::error& err) { BOOST_FAIL("status: " << describe(err, sys)); });
    return pid;
  }

  /// Runs probes/NAME.py after probe_prelude.py and `preamble` in session
  /// `id`; its verdict.
  std::string probe(const std::string& id, const std::string& name,
                    const std::string& preamble) {
    const std::string dir = test::source_dir() + "/test/escapes/";
    std::ifstream prelude(dir + "probe_prelude.py");
    std::ifstream in(dir + "probes/" + name + ".py");
    BOOST_REQUIRE(prelude);
    BOOST_REQUIRE(in);
    std::ostringstream code;
    code << prelude.rdbuf() << preamble << in.rdbuf();
    auto r = run(id, code.str());
    BOOST_TEST_MESSAGE(name << ": " << to_string(r.error) << " " << r.stdout_data
                            << r.stderr_data);
    const auto pos = r.stdout_data.rfind("verdict: ");
    if (pos == std::string::npos)
      return "no verdict: " + r.stderr_data;
    const auto end = r.stdout_data.find('\n', pos);
    return r.stdout_data.substr(pos + 9, end == std::string::npos ? end : end - pos - 9);
  }
};

} // namespace

BOOST_FIXTURE_TEST_SUITE(session_probes, sessions_under_default)

BOOST_AUTO_TEST_CASE(session_neighbour) {
  const std::string a = create();
  const std::string b = create();
  const std::string mark = "castellan-mark-" + a;
  // A file, and a process left running with the marker on its command line.
  auto planted = run(a, "import subprocess\n"
                        "open('/tmp/" + mark + "', 'w').write('secret')\n"
                        "keep = subprocess.Popen(['/usr/bin/python3', '-c', "
                        "'import time; time.sleep(600)', '" + mark + "'])\n");
  BOOST_REQUIRE_MESSAGE(planted.exit_code == 0, planted.stderr_data);
  const int32_t pid = worker_pid(a);
  BOOST_REQUIRE(pid > 0);
  // The probe finds what was planted from the session that planted it...
  const std::string own = probe(a, "session_neighbour",
                                "OTHER_PID = " + std::to_string(pid) + "\nMARK = '" + mark +
                                  "'\n");
  BOOST_TEST(own.find(" ok found:") != std::string::npos, own);
  // ...and none of it reaches the other one.
  BOOST_TEST(probe(b, "session_neighbour",
                   "OTHER_PID = " + std::to_string(pid) + "\nMARK = '" + mark + "'\n") ==
             "ESRCH absent ENOENT nothing ESRCH");
}

BOOST_AUTO_TEST_SUITE_END()
