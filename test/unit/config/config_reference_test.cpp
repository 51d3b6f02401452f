// The default castellan.toml, docs/config.md and the loader agree: every key
// the loader reads is in the default file (set or commented at its default)
// and documented, nothing else is, and the commented values are the defaults.

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <toml++/toml.h>

#include "config/config_loader.hpp"
#include "config_files.hpp"
#include "support/build_paths.hpp"

using namespace castellan;
using castellan::test::all_errors;
using castellan::test::config_dir;

namespace {

std::string slurp(const std::string& path) {
  std::ifstream in{path, std::ios::binary};
  BOOST_TEST_REQUIRE(static_cast<bool>(in), path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string default_file() {
  return slurp(test::source_dir() + "/config/castellan.toml");
}

/// The default file with every commented key and table header turned on.
std::string uncommented(const std::string& text) {
  static const std::regex commented_setting{R"(^# ((\[[a-z_.]+\])|([a-z_]+ = .*))$)"};
  std::istringstream in{text};
  std::string out, line;
  while (std::getline(in, line))
    out += std::regex_replace(line, commented_setting, "$1") + "\n";
  return out;
}

/// The leaf keys of a TOML table as generic paths ("pools[].limits.memory").
void leaf_keys(const toml::table& t, const std::string& prefix, std::set<std::string>& out) {
  for (auto&& [k, v] : t) {
    const std::string path =
        prefix.empty() ? std::string(k.str()) : prefix + "." + std::string(k.str());
    if (v.is_table()) {
      leaf_keys(*v.as_table(), path, out);
    } else if (v.is_array() && !v.as_array()->empty() && v.as_array()->get(0)->is_table()) {
      for (const auto& e : *v.as_array())
        leaf_keys(*e.as_table(), path + "[]", out);
    } else {
      out.insert(path);
    }
  }
}

std::set<std::string> known() {
  auto keys = config::known_config_keys();
  return {keys.begin(), keys.end()};
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_reference)

BOOST_AUTO_TEST_CASE(the_loader_knows_a_plausible_set_of_keys) {
  const auto keys = known();
  // A few of each section, so that an empty list cannot pass the tests below.
  for (const char* k : {"listen", "drain_grace_ms", "state_dir", "policies.dir", "auth.tokens_file",
                        "audit.fsync", "egress.bytes_per_exec", "request_policies.max_pools",
                        "pools[].name", "pools[].policy", "pools[].limits.memory"})
    BOOST_TEST(keys.count(k) == 1u, k);
  BOOST_TEST(keys.count("pools") == 0u);
  BOOST_TEST(keys.count("pools[].limits") == 0u);
}

BOOST_AUTO_TEST_CASE(every_key_is_in_the_default_file_and_it_loads_turned_on) {
  const std::string on = uncommented(default_file());
  BOOST_TEST_REQUIRE(on != default_file());
  std::set<std::string> in_file;
  leaf_keys(toml::parse(on), "", in_file);
  BOOST_TEST(in_file == known(), boost::test_tools::per_element());
  config_dir d;
  auto l = d.load(on);
  BOOST_TEST(l.ok(), all_errors(l));
}

BOOST_AUTO_TEST_CASE(the_commented_values_are_the_defaults) {
  config_dir d;
  auto on = d.load(uncommented(default_file()));
  BOOST_TEST_REQUIRE(on.ok(), all_errors(on));
  auto def = config::builtin_serve_config();
  BOOST_TEST_REQUIRE(def.ok(), all_errors(def));
  const auto& a = on.config;
  const auto& b = def.config;
  if (::geteuid() == 0) { // the commented listen and state_dir are root's
    BOOST_TEST(a.listen == b.listen);
    BOOST_TEST(a.state_dir == b.state_dir);
  }
  BOOST_TEST(a.drain_grace_ms == b.drain_grace_ms);
  BOOST_TEST(a.policies.directory == b.policies.directory);
  BOOST_TEST(a.policies.watch == b.policies.watch);
  BOOST_TEST(a.auth.tokens_file == b.auth.tokens_file);
  BOOST_TEST(a.auth.socket_mode == b.auth.socket_mode);
  BOOST_TEST(a.auth.socket_gid == b.auth.socket_gid);
  BOOST_TEST(a.auth.allow_plaintext_loopback == b.auth.allow_plaintext_loopback);
  BOOST_TEST(a.audit.enabled == b.audit.enabled);
  BOOST_TEST((a.audit.events == b.audit.events));
  BOOST_TEST(a.audit.to_stdout == b.audit.to_stdout);
  BOOST_TEST(a.audit.to_stderr == b.audit.to_stderr);
  BOOST_TEST(a.audit.subscriber_window == b.audit.subscriber_window);
  BOOST_TEST(a.audit.subscriber_timeout_ms == b.audit.subscriber_timeout_ms);
  BOOST_TEST(a.audit.report_interval_ms == b.audit.report_interval_ms);
  BOOST_TEST(a.audit.producer_window == b.audit.producer_window);
  const auto& fa = a.audit.file;
  const auto& fb = b.audit.file;
  BOOST_TEST(fa.path.substr(fa.path.rfind('/')) == fb.path.substr(fb.path.rfind('/')));
  BOOST_TEST(fa.max_bytes == fb.max_bytes);
  BOOST_TEST(fa.max_files == fb.max_files);
  BOOST_TEST((fa.fsync == fb.fsync));
  BOOST_TEST(fa.fsync_interval_ms == fb.fsync_interval_ms);
  BOOST_TEST(fa.queue_records == fb.queue_records);
  BOOST_TEST(fa.queue_bytes == fb.queue_bytes);
  BOOST_TEST(fa.block_timeout_ms == fb.block_timeout_ms);
  const auto& ea = a.egress;
  const auto& eb = b.egress;
  BOOST_TEST(ea.connections_per_worker == eb.connections_per_worker);
  BOOST_TEST(ea.connections_total == eb.connections_total);
  BOOST_TEST(ea.bytes_per_exec == eb.bytes_per_exec);
  BOOST_TEST(ea.head_timeout.count() == eb.head_timeout.count());
  BOOST_TEST(ea.max_head_bytes == eb.max_head_bytes);
  BOOST_TEST(ea.connect_timeout.count() == eb.connect_timeout.count());
  BOOST_TEST(ea.idle_timeout.count() == eb.idle_timeout.count());
  BOOST_TEST(ea.buffer_bytes == eb.buffer_bytes);
  const auto& ra = a.request_policies;
  const auto& rb = b.request_policies;
  BOOST_TEST(ra.max_pools == rb.max_pools);
  BOOST_TEST(ra.idle_timeout_ms == rb.idle_timeout_ms);
  BOOST_TEST(ra.pool_size == rb.pool_size);
  BOOST_TEST(ra.bindable_paths == rb.bindable_paths);
  BOOST_TEST(ra.allow_network == rb.allow_network);
  BOOST_TEST(ra.cache_size == rb.cache_size);
  BOOST_TEST_REQUIRE(a.pools.size() == 1u);
  BOOST_TEST_REQUIRE(b.pools.size() == 1u);
  const auto& pa = a.pools[0];
  const auto& pb = b.pools[0];
  BOOST_TEST(pa.policy == pb.policy);
  BOOST_TEST(pa.spec.name == pb.spec.name);
  BOOST_TEST(pa.spec.size == pb.spec.size);
  BOOST_TEST((pa.spec.mode == pb.spec.mode));
  BOOST_TEST(pa.spec.warm_start == pb.spec.warm_start);
  BOOST_TEST(pa.spec.recycle_after == pb.spec.recycle_after);
  BOOST_TEST(pa.spec.queue_limit == pb.spec.queue_limit);
  BOOST_TEST(pa.spec.default_timeout_ms == pb.spec.default_timeout_ms);
  BOOST_TEST(pa.spec.python == pb.spec.python);
  BOOST_TEST((pa.spec.isolation == pb.spec.isolation));
  BOOST_TEST(pa.spec.limits.memory_bytes == pb.spec.limits.memory_bytes);
  BOOST_TEST(pa.spec.limits.pids == pb.spec.limits.pids);
  BOOST_TEST(pa.spec.limits.cpu_percent == pb.spec.limits.cpu_percent);
  BOOST_TEST(pa.spec.stdout_limit == pb.spec.stdout_limit);
  BOOST_TEST(pa.spec.stderr_limit == pb.spec.stderr_limit);
  BOOST_TEST(pa.spec.code_limit == pb.spec.code_limit);
}

BOOST_AUTO_TEST_CASE(docs_config_md_documents_exactly_the_keys_the_loader_reads) {
  // The reference tables: rows whose first cell is a key in backquotes.
  static const std::regex row{R"(^\| `([a-z_]+(\[\])?(\.[a-z_]+)*)` \|)"};
  std::istringstream in{slurp(test::source_dir() + "/docs/config.md")};
  std::set<std::string> documented;
  std::string line;
  std::smatch m;
  while (std::getline(in, line))
    if (std::regex_search(line, m, row))
      documented.insert(m[1]);
  BOOST_TEST(documented == known(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_SUITE_END()
