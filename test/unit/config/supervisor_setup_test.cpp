// From a loaded config to supervisor_config and pool_spec fields, and a real
// supervisor started from it.

#include <boost/test/unit_test.hpp>

#include <chrono>

#include <caf/all.hpp>

#include "actors/interfaces.hpp"
#include "config/config_loader.hpp"
#include "config/supervisor_setup.hpp"
#include "config_files.hpp"
#include "support/build_paths.hpp"

using namespace castellan;
using castellan::test::all_errors;
using castellan::test::config_dir;
using castellan::test::source_policies;

BOOST_AUTO_TEST_SUITE(supervisor_setup)

BOOST_AUTO_TEST_CASE(every_setting_reaches_its_field) {
  config_dir d;
  d.write("mine.json", R"({"version": 1, "extends": ["no-network"]})");
  auto l =
      d.load(source_policies() +
             "watch = false\n"
             "[audit]\nfile = \"/var/log/x.jsonl\"\nevents = [\"exec_end\"]\nto_stderr = true\n"
             "fsync = \"every_record\"\nmax_files = 9\nsubscriber_window = 17\n"
                  "producer_window = 64\n"
             "[egress]\nconnections_per_worker = 3\nhead_timeout_ms = 1234\n"
             "max_head_bytes = \"8KiB\"\n"
             "[request_policies]\nmax_pools = 2\nbindable_paths = [\"/srv/data\"]\n"
             "allow_network = true\n"
             "[[pools]]\nname = \"fast\"\npolicy = \"strict\"\nsize = 3\nmode = \"shared\"\n"
             "warm_start = true\nrecycle_after = 100\nqueue_limit = 7\ntimeout_ms = 2500\n"
             "[pools.limits]\nmemory = \"96MiB\"\npids = 12\ncpu_percent = 50\n"
             "stdout = \"64KiB\"\nstderr = \"32KiB\"\ncode = \"4MiB\"\n"
             "[[pools]]\nname = \"own\"\npolicy = \"mine.json\"\nisolation = \"none\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  auto sc = config::to_supervisor_config(l.config);
  if (!sc)
    BOOST_FAIL(sc.error().describe());
  BOOST_TEST_REQUIRE(sc->policies.has_value());
  BOOST_TEST(sc->policies->directory == test::source_dir() + "/policies");
  BOOST_TEST(!sc->policies->watch);
  BOOST_TEST_REQUIRE(sc->pools.size() == 2u);
  const pool_config& fast = sc->pools[0];
  BOOST_TEST(fast.name == "fast");
  BOOST_TEST(fast.named_policy == "strict"); // followed through the policy actor
  BOOST_TEST(!fast.policy);
  BOOST_TEST(fast.size == 3u);
  BOOST_TEST((fast.mode == exec_mode::shared));
  BOOST_TEST(fast.warm_start);
  BOOST_TEST(fast.recycle_after == 100u);
  BOOST_TEST(fast.queue_limit == 7u);
  BOOST_TEST(fast.default_timeout_ms == 2500u);
  BOOST_TEST(fast.limits.memory_bytes == 96ull << 20);
  BOOST_TEST(fast.limits.pids == 12u);
  BOOST_TEST(fast.limits.cpu_percent == 50u);
  BOOST_TEST(fast.stdout_limit == 64u << 10);
  BOOST_TEST(fast.stderr_limit == 32u << 10);
  BOOST_TEST(fast.code_limit == 4u << 20);
  BOOST_TEST(fast.ring_capacity >= fast.code_limit + 64); // the code fits one frame
  const pool_config& own = sc->pools[1];
  BOOST_TEST(own.named_policy.empty());
  BOOST_TEST_REQUIRE(own.policy != nullptr); // the file, read and compiled now
  BOOST_TEST(own.policy->name() == "mine");
  BOOST_TEST((own.isolation == platform::isolation_mode::none));
  BOOST_TEST_REQUIRE(sc->audit.has_value());
  BOOST_TEST(sc->audit->file.path == "/var/log/x.jsonl");
  BOOST_TEST(sc->audit->enabled);
  BOOST_TEST(sc->audit->events.count("exec_end") == 1u);
  BOOST_TEST(sc->audit->to_stderr);
  BOOST_TEST((sc->audit->file.fsync == fsync_policy::every_record));
  BOOST_TEST(sc->audit->file.max_files == 9u);
  BOOST_TEST(sc->audit->subscriber_window == 17u);
  BOOST_TEST(sc->audit->producer_window == 64u);
  BOOST_TEST(sc->egress.connections_per_worker == 3u);
  BOOST_TEST(sc->egress.head_timeout.count() == 1234);
  BOOST_TEST(sc->egress.max_head_bytes == 8u << 10);
  BOOST_TEST(sc->policy_pools.max_pools == 2u);
  BOOST_TEST(sc->policy_pools.bindable_paths == std::vector<std::string>{"/srv/data"});
  BOOST_TEST(sc->policy_pools.allow_network);
  BOOST_TEST(sc->policy_pools.policy_dir == test::source_dir() + "/policies");
}

BOOST_AUTO_TEST_CASE(a_policy_file_that_no_longer_loads_fails_the_conversion) {
  config_dir d;
  const auto file = d.write("mine.json", R"({"version": 1})");
  auto l = d.load(source_policies() + "[[pools]]\nname = \"a\"\npolicy = \"mine.json\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  d.write("mine.json", R"({"version": 2})");
  auto sc = config::to_supervisor_config(l.config);
  BOOST_TEST_REQUIRE(!sc);
  BOOST_TEST(sc.error().describe().find("pool a: policy " + file) == 0u, sc.error().describe());
}

BOOST_AUTO_TEST_CASE(the_supervisor_runs_what_the_config_says) {
  // The built-in default with one small pool: the policy directory's
  // `default` reaches the pool through the policy actor, and execs run.
  config_dir d;
  auto l =
      d.load(source_policies() + "[audit]\nfile = \"\"\n"
                                 "[[pools]]\nname = \"main\"\nsize = 1\n"
                                 "[[pools]]\nname = \"strict\"\npolicy = \"strict\"\nsize = 1\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  auto sc = config::to_supervisor_config(l.config);
  if (!sc)
    BOOST_FAIL(sc.error().describe());
  for (auto& pc : sc->pools) {
    pc.worker_binary = test::worker_binary();
    pc.harness = test::harness();
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};
  auto sup = spawn_supervisor(sys, *sc);
  if (!sup)
    BOOST_FAIL(sup.error().describe());
  caf::scoped_actor self{sys};
  auto run = [&](const std::string& pool, const std::string& code) {
    exec_request req;
    req.pool = pool;
    req.code = code;
    exec_result out;
    self->request(*sup, std::chrono::seconds(30), exec_atom::value, req)
        .receive([&](exec_result& r) { out = std::move(r); },
                 [&](caf::error& err) { BOOST_FAIL(sys.render(err)); });
    return out;
  };
  auto main = run("main", "print(6*7)");
  BOOST_TEST(main.stdout_data == "42\n", main.stderr_data);
  // strict is readonly: the policy of the config's second pool is in force.
  auto strict = run("strict", "open('/tmp/x', 'w')");
  BOOST_TEST((strict.error == error_class::exception), to_string(strict.error));
  BOOST_TEST(strict.exception.type == "PermissionError", strict.exception.type);
  self->send(*sup, shutdown_atom::value);
}

BOOST_AUTO_TEST_SUITE_END()
