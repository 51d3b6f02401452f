// Request policies without workers: resolution, identity, the ceiling, the
// cache, and the comparison that decides where a request policy may run.

#include <boost/test/unit_test.hpp>

#include <stdlib.h>
#include <sys/stat.h>
#include <utime.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/policy_tightening.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/supervisor/request_policy.hpp"
#include "support/actor_system_fixture.hpp"

using namespace castellan;
namespace fs = std::filesystem;

namespace {

std::string policies_dir() {
  return test::source_dir() + "/policies";
}

/// The test pool under policies/default.json, in `mode`.
pool_config default_pool(exec_mode mode = exec_mode::isolated) {
  auto pc = test::actor_system_fixture::test_pool(1);
  pc.mode = mode;
  auto doc = policy::load_policy(policies_dir() + "/default.json", policies_dir());
  BOOST_REQUIRE(doc);
  BOOST_REQUIRE(apply_policy(*doc, pc));
  auto resolved = resolve_pool_config(pc);
  BOOST_REQUIRE_MESSAGE(resolved, (resolved ? "" : resolved.error().describe()));
  return *resolved;
}

policy_pool_config settings(std::vector<std::string> bindable = {}) {
  policy_pool_config pp;
  pp.policy_dir = policies_dir();
  pp.bindable_paths = std::move(bindable);
  return pp;
}

request_policy resolve(const std::string& text, const pool_config& base,
                       const policy_pool_config& pp) {
  auto r = resolve_request_policy(text, policy_pool_template(base, pp), pp);
  BOOST_REQUIRE_MESSAGE(r, (r ? "" : r.error().describe()));
  return *r;
}

std::string resolve_error(const std::string& text, const pool_config& base,
                          const policy_pool_config& pp) {
  auto r = resolve_request_policy(text, policy_pool_template(base, pp), pp);
  return r ? std::string("(accepted)") : r.error().describe();
}

} // namespace

BOOST_AUTO_TEST_SUITE(request_policy_tests)

BOOST_AUTO_TEST_CASE(the_hash_identifies_the_merged_policy) {
  const auto base = default_pool();
  const auto pp = settings();
  auto a = resolve(R"({"version": 1, "extends": ["default"]})", base, pp);
  BOOST_TEST(a.hash.size() == 64u);
  BOOST_TEST(a.name == "policy-" + a.hash.substr(0, 12));
  BOOST_TEST(a.pool.name == a.name);
  // The same policy, flat, with the default's own text: same hash.
  std::ifstream in(policies_dir() + "/default.json");
  std::string flat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST(resolve(flat, base, pp).hash == a.hash);
  // One more denied call: another.
  auto b = resolve(R"({"version": 1, "extends": ["default"],
                       "antiEscape": {"denySyscalls": ["uname"]}})",
                   base, pp);
  BOOST_TEST(b.hash != a.hash);
}

BOOST_AUTO_TEST_CASE(the_template_drops_what_the_default_pools_policy_added) {
  auto base = default_pool();
  base.sandbox.extra_paths.push_back({"/srv", false, 4});
  base.sandbox.masked_paths.push_back("/usr/share/doc");
  const auto t = policy_pool_template(base, settings());
  BOOST_TEST(t.sandbox.extra_paths.empty());
  BOOST_TEST(t.sandbox.masked_paths.empty());
  BOOST_TEST(t.sandbox.deny_syscalls.empty());
  BOOST_TEST(!t.sandbox.restrict_execute);
  BOOST_TEST(t.sandbox.landlock == base.sandbox.landlock);
  BOOST_TEST(t.sandbox.landlock_best_effort == base.sandbox.landlock_best_effort);
  BOOST_TEST(t.limits.memory_bytes == base.limits.memory_bytes);
  BOOST_TEST(t.size == 1u);
}

BOOST_AUTO_TEST_CASE(the_ceiling_names_each_problem) {
  const auto base = default_pool();
  const auto pp = settings({"/srv/data"});
  BOOST_TEST(resolve_error(R"({"version": 1, "fs": {"rules": [
      {"action": "allow", "path": "/srv/data/x", "perms": ["read_file"]},
      {"action": "allow", "path": "/srv/other", "perms": ["read_file"]},
      {"action": "allow", "path": "/tmp/x", "perms": ["read_file"]},
      {"action": "deny", "path": "/root", "perms": ["read_file"]}]}})",
                           base, pp) ==
             "request policy: /fs/rules/1: \"/srv/other\": grants a host path outside the "
             "sandbox's default root that request policies may not bind (bindable: "
             "/srv/data) (ceiling)");
  const std::string layers =
      resolve_error(R"({"version": 1, "plugins": {"seccomp": false, "cgroups": {"enabled": true,
                     "best_effort": true}}, "limits": {"pids": 65536}})",
                    base, pp);
  BOOST_TEST(layers.find("request policy: /plugins/seccomp: a request policy may not switch "
                         "off or weaken the seccomp layer") != std::string::npos,
             layers);
  BOOST_TEST(layers.find("request policy: /plugins/cgroups:") != std::string::npos, layers);
  BOOST_TEST(layers.find("request policy: /limits/pids: 65536: above what the supervisor's pools "
                         "allow (64) (ceiling)") != std::string::npos,
             layers);
  auto networked = pp;
  BOOST_TEST(resolve_error(R"({"version": 1, "defaults": {"net": "allow"}})", base, networked)
                 .find("request policy: /net: allows network") != std::string::npos);
  networked.allow_network = true;
  BOOST_TEST(resolve(R"({"version": 1, "defaults": {"net": "allow"}})", base, networked)
                 .pool.egress_policy != nullptr);
}

BOOST_AUTO_TEST_CASE(where_a_request_policy_may_run) {
  const auto pool = default_pool(exec_mode::isolated);
  const auto pp = settings({"/usr/share"});
  auto route = [&](const pool_config& p, const std::string& text) {
    auto rp = resolve(text, pool, pp);
    if (same_enforcement(p, rp.pool))
      return std::string("same");
    auto fit = narrows(p, rp.pool);
    return fit ? std::string("narrowed") : "own: " + fit.why_not;
  };
  BOOST_TEST(route(pool, R"({"version": 1, "extends": ["default"]})") == "same");
  // Executing nothing at all is stricter (Landlock in the exec's process).
  BOOST_TEST(route(pool, R"({"version": 1, "extends": ["default"], "antiEscape":
                            {"denySyscalls": ["uname"]}})") == "narrowed");
  // Less than the pool denies: looser.
  BOOST_TEST(
      route(pool, R"({"version": 1, "defaults": {"exec": "deny"}})").find("the pool denies ") !=
      std::string::npos);
  // A bind the pool does not have.
  BOOST_TEST(route(pool, R"({"version": 1, "extends": ["default"], "fs": {"rules":
                            [{"action": "allow", "path": "/usr/share", "perms": ["read_file"]}]}})") ==
             "same"); // inside the default root: a Landlock right, not a bind
  // Different cgroup limits are the worker's: not narrowed.
  BOOST_TEST(route(pool, R"({"version": 1, "extends": ["default"], "limits": {"pids": 8}})")
                 .find("cgroup limits") != std::string::npos);
  // Decided calls need their own pool.
  BOOST_TEST(route(pool, R"({"version": 1, "extends": ["default"], "fs": {"rules":
                            [{"action": "deny", "path": "/tmp/secret", "perms": ["write_file"]}]}})")
                 .find("seccomp notify") != std::string::npos);
  // Shared mode narrows nothing.
  const auto shared = default_pool(exec_mode::shared);
  BOOST_TEST(route(shared, R"({"version": 1, "extends": ["default"], "antiEscape":
                             {"denySyscalls": ["uname"]}})")
                 .find("shared mode") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(the_tightening_holds_the_request_policys_rules) {
  const auto pool = default_pool(exec_mode::isolated);
  const auto pp = settings();
  auto rp = resolve(R"({"version": 1, "extends": ["default"], "antiEscape":
                       {"denySyscalls": ["uname", "ptrace"]}})",
                    pool, pp);
  auto payload = make_tightening(pool, rp.pool, rp.name);
  BOOST_REQUIRE(payload);
  auto desc = nlohmann::json::parse(*payload);
  BOOST_TEST(desc["version"] == 1);
  BOOST_TEST(desc["policy"] == rp.name);
  BOOST_TEST(desc["landlock"]["best_effort"] == false);
  BOOST_TEST(desc["landlock"]["require_net"] == false);
  bool usr = false;
  for (const auto& rule : desc["landlock"]["paths"])
    usr = usr || rule["path"] == "/usr";
  BOOST_TEST(usr);
  // Only what the pool's filter does not deny already.
  BOOST_TEST(desc["seccomp"]["denied"] == nlohmann::json::array({"uname"}));
  BOOST_TEST(!desc["seccomp"]["program"].get<std::string>().empty());
  auto plain = resolve(R"({"version": 1, "extends": ["default"]})", pool, pp);
  auto none = nlohmann::json::parse(*make_tightening(pool, plain.pool, plain.name));
  BOOST_TEST(none["seccomp"].is_null());
}

BOOST_AUTO_TEST_CASE(the_cache_follows_the_files_a_policy_extends) {
  char tmpl[] = "/tmp/castellan-reqpol-XXXXXX";
  const char* dir = ::mkdtemp(tmpl);
  BOOST_REQUIRE(dir != nullptr);
  const std::string base_file = std::string(dir) + "/base.json";
  std::ofstream(base_file) << R"({"version": 1, "limits": {"pids": 10}})";
  auto pool = default_pool();
  auto pp = settings();
  pp.policy_dir = dir;
  const auto tmpl_cfg = policy_pool_template(pool, pp);
  request_policy_cache cache(2);
  const std::string text = R"({"version": 1, "extends": ["base"]})";
  auto first = cache.resolve(text, tmpl_cfg, pp);
  BOOST_REQUIRE(first);
  auto again = cache.resolve(text, tmpl_cfg, pp);
  BOOST_REQUIRE(again);
  BOOST_TEST(first->get() == again->get()); // the same resolution
  // The extended file changes: resolved again, with the new content.
  std::ofstream(base_file, std::ios::trunc) << R"({"version": 1, "limits": {"pids": 12}})";
  utimbuf later{::time(nullptr) + 10, ::time(nullptr) + 10};
  ::utime(base_file.c_str(), &later);
  auto changed = cache.resolve(text, tmpl_cfg, pp);
  BOOST_REQUIRE(changed);
  BOOST_TEST(changed->get() != first->get());
  BOOST_TEST((*changed)->hash != (*first)->hash);
  BOOST_TEST((*changed)->pool.limits.pids == 12u);
  // Bounded: the least recently used text goes.
  BOOST_REQUIRE(cache.resolve(R"({"version": 1})", tmpl_cfg, pp));
  BOOST_REQUIRE(cache.resolve(R"({"version": 1, "limits": {"pids": 5}})", tmpl_cfg, pp));
  BOOST_TEST(cache.size() == 2u);
  // Errors are answered, not kept.
  BOOST_TEST(!cache.resolve("{", tmpl_cfg, pp));
  BOOST_TEST(cache.size() == 2u);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

BOOST_AUTO_TEST_SUITE_END()
