// Loading and checking castellan.toml: the default file, every kind of error
// with its exact message, all of them in one pass, paths and warnings.

#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <string>
#include <vector>

#include "config/config_loader.hpp"
#include "config_files.hpp"
#include "support/build_paths.hpp"
#include "support/test_certificate.hpp"

using namespace castellan;
using castellan::test::all_errors;
using castellan::test::config_dir;
using castellan::test::source_policies;

namespace {

std::vector<std::string> described(const std::vector<config::config_error>& errors) {
  std::vector<std::string> out;
  for (const auto& e : errors)
    out.push_back(e.describe());
  return out;
}

/// The one error `text` gives (followed by the source policies), described
/// without the file name: "line:column: key: value: message".
std::string only_error(const std::string& text) {
  config_dir d;
  auto l = d.load(text + "\n" + source_policies());
  BOOST_TEST_REQUIRE(l.errors.size() == 1u, text << "\n" << all_errors(l));
  const std::string full = l.errors.front().describe();
  const std::string file = d.path + "/castellan.toml:";
  BOOST_TEST_REQUIRE(full.compare(0, file.size(), file) == 0, full);
  return full.substr(file.size());
}

} // namespace

BOOST_AUTO_TEST_SUITE(config_loader)

BOOST_AUTO_TEST_CASE(the_default_file_loads_with_the_pool_defaults) {
  auto l = config::load_serve_config(test::source_dir() + "/config/castellan.toml");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.warnings.empty());
  const auto& c = l.config;
  BOOST_TEST_REQUIRE(c.pools.size() == 1u);
  const auto& p = c.pools.front();
  const pool_spec defaults;
  BOOST_TEST(p.spec.name == "default");
  BOOST_TEST(p.policy == "default");
  BOOST_TEST(p.policy_is_name);
  BOOST_TEST(p.policy_file == c.policies.directory + "/default.json");
  BOOST_TEST(p.spec.size == defaults.size);
  BOOST_TEST(p.spec.queue_limit == defaults.queue_limit);
  BOOST_TEST(p.spec.python == defaults.python);
  BOOST_TEST((p.spec.mode == defaults.mode));
  BOOST_TEST(p.spec.limits.memory_bytes == defaults.limits.memory_bytes);
  BOOST_TEST(p.spec.code_limit == defaults.code_limit);
  // The installed (here: the build tree's) pre-built policies.
  BOOST_TEST(c.policies.directory == test::build_dir() + "/share/castellan/policies");
  BOOST_TEST(c.policies.watch);
  BOOST_TEST(c.request_policies.policy_dir == c.policies.directory);
  BOOST_TEST(c.audit.file.path == c.state_dir + "/audit.jsonl");
  BOOST_TEST(!c.audit.enabled);
  BOOST_TEST(c.drain_grace_ms == 10000u);
  BOOST_TEST(c.auth.tokens_file.empty());
  if (::geteuid() == 0) {
    BOOST_TEST(c.listen == std::vector<std::string>{"unix:/run/castellan/castellan.sock"});
    BOOST_TEST(c.state_dir == "/var/lib/castellan");
  }
}

BOOST_AUTO_TEST_CASE(an_empty_file_is_the_built_in_default) {
  auto builtin = config::builtin_serve_config();
  BOOST_TEST_REQUIRE(builtin.ok(), all_errors(builtin));
  BOOST_TEST(builtin.config.source == "<built-in>");
  BOOST_TEST_REQUIRE(builtin.config.pools.size() == 1u);
  BOOST_TEST(builtin.config.pools[0].spec.name == "default");
  BOOST_TEST(builtin.config.pools[0].policy == "default");
  BOOST_TEST(builtin.config.listen == std::vector<std::string>{config::default_listen_address()});
  config_dir d;
  auto empty = d.load("");
  BOOST_TEST_REQUIRE(empty.ok(), all_errors(empty));
  BOOST_TEST(empty.config.state_dir == builtin.config.state_dir);
  BOOST_TEST(empty.config.pools[0].policy_file == builtin.config.pools[0].policy_file);
}

BOOST_AUTO_TEST_CASE(every_error_in_one_pass_in_file_order) {
  config_dir d;
  const std::string text = "listen = [\"unix:/tmp/x.sock\", \"http://0.0.0.0:80\", 3]\n"
                           "drain_grace_ms = -5\n"
                           "poolz = 1\n"
                           "[audit]\n"
                           "events = [\"exec_start\", \"exec_strat\", \"openat\", \"openat\"]\n"
                           "fsync = \"sometimes\"\n"
                           "max_bytes = \"64MB\"\n"
                           "[egress]\n"
                           "bytes_per_exec = 1.5\n"
                           "[[pools]]\n"
                           "name = \"fast\"\n"
                           "policy = \"strct\"\n"
                           "size = 0\n"
                           "mode = \"reuse\"\n"
                           "[pools.limits]\n"
                           "memory = \"256 MiB\"\n"
                           "memroy = \"1GiB\"\n"
                           "[[pools]]\n"
                           "name = \"fast\"\n"
                           "policy = \"./missing.json\"\n"
                           "[[pools]]\n"
                           "policy = \"strict\"\n" +
                           source_policies();
  auto l = d.load(text);
  const std::string f = d.path + "/castellan.toml";
  const std::string pdir = test::source_dir() + "/policies";
  const std::vector<std::string> expected = {
      f + ":1:31: listen[1]: \"http://0.0.0.0:80\": the scheme is not 'unix:', 'tcp:' or "
          "'tls:' (unix:PATH, tcp:HOST:PORT or tls:HOST:PORT)",
      f + ":1:52: listen[2]: 3: must be a string, not an integer",
      f + ":2:18: drain_grace_ms: -5: must be between 0 and 3600000",
      f + ":3:1: poolz: 1: unknown key (did you mean \"pools\"?)",
      f + ":5:25: audit.events[1]: \"exec_strat\": not an audit kind, \"*\", \"all\" or a syscall "
          "name libseccomp knows (did you mean \"exec_start\"?)",
      f + ":5:49: audit.events[3]: \"openat\": listed twice",
      f + ":6:9: audit.fsync: \"sometimes\": must be one of \"never\", \"interval\", "
          "\"every_record\"",
      f + ":7:13: audit.max_bytes: \"64MB\": unknown unit \"MB\" (use B, KiB, MiB, GiB or TiB, "
          "with no "
          "space: e.g. \"256MiB\")",
      f + ":9:18: egress.bytes_per_exec: 1.5: must be a size (bytes, or a string such as "
          "\"256MiB\"), not a float",
      f + ":12:10: pools[0].policy: \"strct\": no policy of that name in " + pdir +
          " (did you mean \"strict\"?)",
      f + ":13:8: pools[0].size: 0: must be between 1 and 1024",
      f + ":14:8: pools[0].mode: \"reuse\": must be one of \"isolated\", \"shared\"",
      f + ":16:10: pools[0].limits.memory: \"256 MiB\": no space between the number and its unit "
          "(e.g. \"256MiB\")",
      f + ":17:1: pools[0].limits.memroy: \"1GiB\": unknown key (did you mean \"memory\"?)",
      f + ":19:8: pools[1].name: \"fast\": pool name already used by pools[0] (line 11)",
      f + ":20:10: pools[1].policy: \"./missing.json\": policy file " + d.path +
          "/missing.json: No such file or directory",
      f + ":21:1: pools[2].name: missing: every pool needs a name",
  };
  BOOST_TEST(described(l.errors) == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(listen_addresses_are_parsed_as_serve_parses_them) {
  BOOST_TEST(only_error("listen = [\"unix:run/c.sock\"]\n") ==
             "1:11: listen[0]: \"unix:run/c.sock\": the unix socket path 'run/c.sock' is not "
             "absolute");
  BOOST_TEST(only_error("listen = [\"tcp:127.0.0.1:99999\"]\n") ==
             "1:11: listen[0]: \"tcp:127.0.0.1:99999\": the port '99999' is not a number from 0 "
             "to 65535");
  BOOST_TEST(only_error("listen = [\"tcp:[::1]:80\", \"tcp:[::1]:80\"]\n") ==
             "1:27: listen[1]: \"tcp:[::1]:80\": listed twice");
  BOOST_TEST(only_error("listen = []\n") == "1:10: listen: []: must list at least one address");
  config_dir d;
  auto l = d.load("listen = [\"unix:/run/c.sock\", \"tcp:[::1]:8080\", \"tcp:localhost:0\"]\n" +
                  source_policies() + "[auth]\nallow_plaintext_loopback = true\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.config.listen.size() == 3u);
}

BOOST_AUTO_TEST_CASE(wrong_types_name_both_types) {
  BOOST_TEST(only_error("drain_grace_ms = \"10s\"\n") ==
             "1:18: drain_grace_ms: \"10s\": must be an integer, not a string");
  BOOST_TEST(only_error("listen = \"unix:/x\"\n") ==
             "1:10: listen: \"unix:/x\": must be an array of strings, not a string");
  BOOST_TEST(only_error("state_dir = 7\n") ==
             "1:13: state_dir: 7: must be a string, not an integer");
  BOOST_TEST(only_error("audit = 1\n") ==
             "1:9: audit: 1: must be a table ([audit]), not an integer");
  BOOST_TEST(only_error("[pools]\nname = \"x\"\n") ==
             "1:1: pools: {…}: must be an array of tables ([[pools]]), not a table");
  BOOST_TEST(only_error("pools = []\n") == "1:9: pools: []: must declare at least one pool");
  BOOST_TEST(only_error("pools = [1]\n") == "1:10: pools[0]: 1: must be a table, not an integer");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nwarm_start = \"yes\"\n") ==
             "3:14: pools[0].warm_start: \"yes\": must be true or false, not a string");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nlimits = 5\n") ==
             "3:10: pools[0].limits: 5: must be a table ([pools[0].limits]), not an integer");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nsize = 2.0\n") ==
             "3:8: pools[0].size: 2.0: must be an integer, not a float");
  BOOST_TEST(only_error("[request_policies]\nbindable_paths = [\"/srv\", 1]\n") ==
             "2:27: request_policies.bindable_paths[1]: 1: must be a string, not an integer");
}

BOOST_AUTO_TEST_CASE(numbers_out_of_range) {
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nsize = 1025\n") ==
             "3:8: pools[0].size: 1025: must be between 1 and 1024");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\ntimeout_ms = 0\n") ==
             "3:14: pools[0].timeout_ms: 0: must be between 1 and 86400000");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nlimits.memory = \"512KiB\"\n") ==
             "3:17: pools[0].limits.memory: \"512KiB\": must be between 1MiB and 1TiB, or 0 "
             "(unlimited)");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nlimits.code = \"64MiB\"\n") ==
             "3:15: pools[0].limits.code: \"64MiB\": must be between 1 and 32MiB");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nlimits.pids = -1\n") ==
             "3:15: pools[0].limits.pids: -1: must be between 0 and 65536");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nlimits.stdout = -1\n") ==
             "3:17: pools[0].limits.stdout: -1: a size cannot be negative");
  BOOST_TEST(only_error("[egress]\nmax_head_bytes = \"2MiB\"\n") ==
             "2:18: egress.max_head_bytes: \"2MiB\": must be between 1KiB and 1MiB");
  BOOST_TEST(only_error("[request_policies]\nidle_timeout_ms = 0\n") ==
             "2:19: request_policies.idle_timeout_ms: 0: must be between 1 and 86400000");
  config_dir d;
  auto edges = d.load(source_policies() +
                      "[[pools]]\nname = \"a\"\nsize = 1\n[[pools]]\nname = \"b\"\nsize = 1024\n");
  BOOST_TEST_REQUIRE(edges.ok(), all_errors(edges));
  BOOST_TEST(edges.config.pools[0].spec.size == 1u);
  BOOST_TEST(edges.config.pools[1].spec.size == 1024u);
}

BOOST_AUTO_TEST_CASE(sizes_take_bytes_or_units) {
  config_dir d;
  auto l = d.load(source_policies() +
                  "[[pools]]\nname = \"a\"\n[pools.limits]\nmemory = \"1GiB\"\nstdout = 4096\n"
                  "stderr = \"0\"\ncode = \"2MiB\"\n[[pools]]\nname = \"b\"\nlimits.memory = 0\n"
                  "[audit]\nmax_bytes = 0\nqueue_bytes = \"1GiB\"\n[egress]\nbytes_per_exec = 0\n"
                  "buffer_bytes = \"16MiB\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  const auto& a = l.config.pools[0].spec;
  BOOST_TEST(a.limits.memory_bytes == 1ull << 30);
  BOOST_TEST(a.stdout_limit == 4096u);
  BOOST_TEST(a.stderr_limit == 0u);
  BOOST_TEST(a.code_limit == 2ull << 20);
  BOOST_TEST(l.config.pools[1].spec.limits.memory_bytes == 0u); // unlimited
  BOOST_TEST(l.config.audit.file.max_bytes == 0u);
  BOOST_TEST(l.config.audit.file.queue_bytes == 1ull << 30);
  BOOST_TEST(l.config.egress.bytes_per_exec == 0u);
  BOOST_TEST(l.config.egress.buffer_bytes == 16u << 20);
}

BOOST_AUTO_TEST_CASE(unknown_keys_everywhere) {
  BOOST_TEST(only_error("[egress]\nconnections_per_wroker = 3\n") ==
             "2:1: egress.connections_per_wroker: 3: unknown key (did you mean "
             "\"connections_per_worker\"?)");
  BOOST_TEST(only_error("[auth]\npassword = \"x\"\n") ==
             "2:1: auth.password: \"x\": unknown key (allowed here: tokens_file, socket_mode, "
             "socket_group, allow_plaintext_loopback)");
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\n\"odd key\" = 1\n") ==
             "3:1: pools[0].\"odd key\": 1: unknown key (allowed here: name, policy, size, mode, "
             "warm_start, recycle_after, queue_limit, timeout_ms, python, isolation, limits)");
  config_dir d;
  auto l = d.load("[policies]\ndirectory = \"/x\"\n");
  BOOST_TEST_REQUIRE(!l.errors.empty());
  BOOST_TEST(l.errors.front().describe() ==
             d.path + "/castellan.toml:2:1: policies.directory: \"/x\": unknown key "
                      "(allowed here: dir, watch)");
}

BOOST_AUTO_TEST_CASE(toml_syntax_errors_have_their_place) {
  config_dir d;
  auto l = d.load("drain_grace_ms = 1\ndrain_grace_ms = 2\n");
  BOOST_TEST_REQUIRE(l.errors.size() == 1u, all_errors(l));
  BOOST_TEST(l.errors[0].line == 2u);
  BOOST_TEST(l.errors[0].describe().find("(TOML syntax)") != std::string::npos);
  auto broken = d.load("[[pools]\nname = \"a\"\n");
  BOOST_TEST_REQUIRE(broken.errors.size() == 1u, all_errors(broken));
  BOOST_TEST(broken.errors[0].line == 1u);
}

BOOST_AUTO_TEST_CASE(files_that_cannot_be_read_or_are_too_large) {
  config_dir d;
  auto missing = config::load_serve_config(d.path + "/nope.toml");
  BOOST_TEST_REQUIRE(missing.errors.size() == 1u);
  BOOST_TEST(missing.errors[0].describe() ==
             d.path + "/nope.toml: cannot read: No such file or directory");
  auto big = config::load_serve_config(
      d.write("big.toml", std::string(config::max_config_bytes + 1, '#')));
  BOOST_TEST_REQUIRE(big.errors.size() == 1u);
  BOOST_TEST(big.errors[0].describe() == d.path + "/big.toml: larger than 1MiB");
  auto dir = config::load_serve_config(d.path);
  BOOST_TEST_REQUIRE(dir.errors.size() == 1u);
  BOOST_TEST(dir.errors[0].describe() == d.path + ": not a regular file");
}

BOOST_AUTO_TEST_CASE(pool_names) {
  BOOST_TEST(only_error("[[pools]]\nname = \"\"\n") ==
             "2:8: pools[0].name: \"\": a pool name has 1 to 64 characters");
  BOOST_TEST(only_error("[[pools]]\nname = \"a b\"\n") ==
             "2:8: pools[0].name: \"a b\": a pool name has only letters, digits, '_', '-' and '.'");
  BOOST_TEST(only_error("[[pools]]\nname = \"policy-x\"\n") ==
             "2:8: pools[0].name: \"policy-x\": names starting with \"policy-\" are the pools of "
             "request policies");
}

BOOST_AUTO_TEST_CASE(policies_by_name_and_by_path) {
  config_dir d;
  d.write("mine.json", R"({"version": 1, "extends": ["strict"]})");
  ::mkdir((d.path + "/sub").c_str(), 0755);
  d.write("sub/bad.json", R"({"version": 1, "defaults": {"fs": "alow"}})");
  auto ok = d.load(source_policies() + "[[pools]]\nname = \"a\"\npolicy = \"mine.json\"\n"
                                       "[[pools]]\nname = \"b\"\npolicy = \"strict\"\n");
  BOOST_TEST_REQUIRE(ok.ok(), all_errors(ok));
  BOOST_TEST(!ok.config.pools[0].policy_is_name);
  BOOST_TEST(ok.config.pools[0].policy_file == d.path + "/mine.json");
  BOOST_TEST(ok.config.pools[1].policy_is_name);
  BOOST_TEST(ok.config.pools[1].policy_file == test::source_dir() + "/policies/strict.json");
  auto bad = d.load(source_policies() + "[[pools]]\nname = \"a\"\npolicy = \"sub/bad.json\"\n");
  BOOST_TEST_REQUIRE(bad.errors.size() == 1u, all_errors(bad));
  BOOST_TEST(bad.errors[0].describe() ==
             d.path + "/castellan.toml:5:10: pools[0].policy: \"sub/bad.json\": invalid policy: " +
                 d.path +
                 "/sub/bad.json: /defaults/fs: \"alow\": must be one of \"allow\", \"deny\", "
                 "\"warn\" (schema: enum)");
  auto no_dir = d.load("[policies]\ndir = \"nowhere\"\n");
  BOOST_TEST_REQUIRE(no_dir.errors.size() == 1u, all_errors(no_dir));
  BOOST_TEST(no_dir.errors[0].key == "policies.dir");
  BOOST_TEST(no_dir.errors[0].line == 2u);
  BOOST_TEST(no_dir.errors[0].value == "\"" + d.path + "/nowhere\"");
}

BOOST_AUTO_TEST_CASE(limits_a_policy_replaces_are_warned_about) {
  config_dir d;
  auto l = d.load(source_policies() +
                  "[[pools]]\nname = \"a\"\npolicy = \"strict\"\ntimeout_ms = 1000\n"
                  "[pools.limits]\nmemory = \"1GiB\"\n"
                  "[[pools]]\nname = \"b\"\npolicy = \"audit\"\nlimits.memory = \"1GiB\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  // strict sets both; audit sets no limits, so pool b's memory holds.
  BOOST_TEST_REQUIRE(l.warnings.size() == 2u);
  const std::string f = d.path + "/castellan.toml";
  BOOST_TEST(
      l.warnings[0].describe() ==
      f + ":6:14: pools[0].timeout_ms: policy \"strict\" sets limits.timeout_ms = 5000, which "
          "the pool uses instead");
  BOOST_TEST(l.warnings[1].describe() ==
             f + ":8:10: pools[0].limits.memory: policy \"strict\" sets limits.memory_bytes = "
                 "134217728, which the pool uses instead");
}

BOOST_AUTO_TEST_CASE(warm_start_needs_the_sandbox) {
  BOOST_TEST(only_error("[[pools]]\nname = \"a\"\nwarm_start = true\nisolation = \"none\"\n") ==
             "3:14: pools[0].warm_start: true: warm_start starts sandboxed workers: it does not "
             "apply to isolation \"none\"");
}

BOOST_AUTO_TEST_CASE(the_tokens_file_is_its_owners_alone) {
  config_dir d;
  d.write("tokens", "x\n", 0644);
  d.write("private", "", 0600);
  auto open = d.load(source_policies() + "[auth]\ntokens_file = \"tokens\"\n");
  BOOST_TEST_REQUIRE(open.errors.size() == 1u, all_errors(open));
  BOOST_TEST(open.errors[0].describe() ==
             d.path + "/castellan.toml:4:15: auth.tokens_file: \"" + d.path +
                 "/tokens\": mode 0644 lets others than its owner use it (chmod 600)");
  auto fine = d.load(source_policies() + "[auth]\ntokens_file = \"private\"\n");
  BOOST_TEST_REQUIRE(fine.ok(), all_errors(fine));
  BOOST_TEST(fine.config.auth.tokens_file == d.path + "/private");
  auto missing = d.load(source_policies() + "[auth]\ntokens_file = \"/nonexistent/t\"\n");
  BOOST_TEST_REQUIRE(missing.errors.size() == 1u, all_errors(missing));
  BOOST_TEST(missing.errors[0].message == "No such file or directory");
}

BOOST_AUTO_TEST_CASE(plain_tcp_only_on_loopback_and_only_when_allowed) {
  BOOST_TEST(only_error("listen = [\"tcp:127.0.0.1:8080\"]\n") ==
             "1:11: listen[0]: \"tcp:127.0.0.1:8080\": plain TCP on loopback lets any local user "
             "connect: set auth.allow_plaintext_loopback = true to allow it (and "
             "auth.tokens_file to require tokens)");
  BOOST_TEST(only_error("listen = [\"unix:/run/c.sock\", \"tcp:10.0.0.1:80\"]\n[auth]\n"
                        "allow_plaintext_loopback = true\n") ==
             "1:31: listen[1]: \"tcp:10.0.0.1:80\": not a loopback address: plain TCP listens on "
             "loopback only; elsewhere use TLS (tls:HOST:PORT, with [tls] and auth.tokens_file)");
  BOOST_TEST(
      only_error("listen = [\"tcp:example.org:80\"]\n[auth]\nallow_plaintext_loopback = "
                 "true\n") ==
      "1:11: listen[0]: \"tcp:example.org:80\": not a loopback address: plain TCP listens "
      "on loopback only; elsewhere use TLS (tls:HOST:PORT, with [tls] and auth.tokens_file)");
  // IPv4-mapped loopback is not taken for loopback: the server would not
  // bind it as such either.
  BOOST_TEST(only_error("listen = [\"tcp:[::ffff:127.0.0.1]:80\"]\n[auth]\n"
                        "allow_plaintext_loopback = true\n") ==
             "1:11: listen[0]: \"tcp:[::ffff:127.0.0.1]:80\": not a loopback address: plain TCP "
             "listens on loopback only; elsewhere use TLS (tls:HOST:PORT, with [tls] and "
             "auth.tokens_file)");
  config_dir d;
  auto l = d.load("listen = [\"tcp:127.0.0.2:0\", \"tcp:[::1]:0\", \"tcp:localhost:0\"]\n" +
                  source_policies() + "[auth]\nallow_plaintext_loopback = true\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.config.auth.allow_plaintext_loopback);
}

BOOST_AUTO_TEST_CASE(tls_listeners_need_tls_and_tokens) {
  BOOST_TEST(only_error("listen = [\"tls:0.0.0.0:8443\"]\n") ==
             "1:11: listen[0]: \"tls:0.0.0.0:8443\": a TLS listener needs [tls] cert_file and "
             "key_file, and auth.tokens_file");
  config_dir d;
  auto cert = test::make_test_certificate(d.path);
  auto other = test::make_test_certificate(d.path, "other");
  d.write("tokens", "", 0600);
  const std::string tls = "[tls]\ncert_file = \"cert.pem\"\nkey_file = \"cert-key.pem\"\n";
  auto no_tokens = d.load("listen = [\"tls:0.0.0.0:8443\"]\n" + source_policies() + tls);
  BOOST_TEST_REQUIRE(no_tokens.errors.size() == 1u, all_errors(no_tokens));
  BOOST_TEST(no_tokens.errors[0].describe() ==
             d.path + "/castellan.toml:1:11: listen[0]: \"tls:0.0.0.0:8443\": a TLS listener "
                      "needs auth.tokens_file: without tokens it would admit anyone who can "
                      "reach it");
  auto fine = d.load("listen = [\"tls:0.0.0.0:8443\", \"tls:[::1]:0\"]\n" + source_policies() +
                     tls + "[auth]\ntokens_file = \"tokens\"\n");
  BOOST_TEST_REQUIRE(fine.ok(), all_errors(fine));
  BOOST_TEST(fine.config.tls.cert_file == cert.cert_file);
  BOOST_TEST(fine.config.tls.key_file == cert.key_file);
  // The key: its owner's alone, and the certificate's.
  ::chmod(cert.key_file.c_str(), 0640);
  auto open = d.load(source_policies() + tls);
  BOOST_TEST_REQUIRE(open.errors.size() == 1u, all_errors(open));
  BOOST_TEST(open.errors[0].describe() ==
             d.path + "/castellan.toml:5:12: tls.key_file: \"" + cert.key_file +
                 "\": mode 0640 lets others than its owner read the key (chmod 600)");
  ::chmod(cert.key_file.c_str(), 0600);
  auto mismatch =
      d.load(source_policies() + "[tls]\ncert_file = \"cert.pem\"\nkey_file = \"other-key.pem\"\n");
  BOOST_TEST_REQUIRE(mismatch.errors.size() == 1u, all_errors(mismatch));
  BOOST_TEST(mismatch.errors[0].key == "tls.cert_file");
  BOOST_TEST(mismatch.errors[0].message.find("does not match the certificate") != std::string::npos,
             mismatch.errors[0].message);
  auto half = d.load(source_policies() + "[tls]\ncert_file = \"cert.pem\"\n");
  BOOST_TEST_REQUIRE(half.errors.size() == 1u, all_errors(half));
  BOOST_TEST(half.errors[0].describe() ==
             d.path + "/castellan.toml:4:13: tls.key_file: missing: [tls] needs both cert_file "
                      "and key_file");
}

BOOST_AUTO_TEST_CASE(the_sockets_mode_and_group) {
  BOOST_TEST(only_error("[auth]\nsocket_mode = \"0666\"\n") ==
             "2:15: auth.socket_mode: \"0666\": must be one of \"0600\", \"0660\"");
  BOOST_TEST(only_error("[auth]\nsocket_group = \"root\"\n") ==
             "2:16: auth.socket_group: \"root\": the group has no access with socket_mode "
             "\"0600\": set socket_mode = \"0660\"");
  BOOST_TEST(only_error("[auth]\nsocket_mode = \"0660\"\nsocket_group = \"no-such-group-x\"\n") ==
             "3:16: auth.socket_group: \"no-such-group-x\": no such group");
  config_dir d;
  auto l = d.load(source_policies() + "[auth]\nsocket_mode = \"0660\"\nsocket_group = \"root\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.config.auth.socket_mode == 0660u);
  BOOST_TEST(l.config.auth.socket_gid == 0);
  auto plain = d.load(source_policies());
  BOOST_TEST(plain.config.auth.socket_mode == 0600u);
  BOOST_TEST(plain.config.auth.socket_gid == -1);
}

BOOST_AUTO_TEST_CASE(the_tokens_file_is_loaded_and_checked_against_the_pools) {
  config_dir d;
  d.write("tokens",
          "[[tokens]]\nname = \"ci\"\nsha256 = \"" + std::string(64, 'a') +
              "\"\npools = [\"alpha\"]\nmax_concurrent = 2\n\n[[tokens]]\nname = \"ops\"\n"
              "sha256 = \"" +
              std::string(64, 'b') + "\"\npools = [\"gamma\"]\n",
          0600);
  auto l = d.load(source_policies() + "[auth]\ntokens_file = \"tokens\"\n" +
                  "[[pools]]\nname = \"alpha\"\n[[pools]]\nname = \"beta\"\n");
  // The tokens file's errors name the tokens file, and come after the
  // config's own.
  BOOST_TEST_REQUIRE(l.errors.size() == 1u, all_errors(l));
  BOOST_TEST(l.errors[0].describe() ==
             d.path + "/tokens:10:10: tokens[1].pools[0]: \"gamma\": no pool of that name in the "
                      "config (its pools: \"alpha\", \"beta\")");
  d.write("tokens",
          "[[tokens]]\nname = \"ci\"\nsha256 = \"" + std::string(64, 'a') +
              "\"\npools = [\"alpha\"]\nmax_concurrent = 2\n",
          0600);
  auto ok = d.load(source_policies() + "[auth]\ntokens_file = \"tokens\"\n" +
                   "[[pools]]\nname = \"alpha\"\n");
  BOOST_TEST_REQUIRE(ok.ok(), all_errors(ok));
  BOOST_TEST_REQUIRE(ok.config.auth.tokens.size() == 1u);
  const auto& t = ok.config.auth.tokens[0];
  BOOST_TEST(t.name == "ci");
  BOOST_TEST(api::to_hex(t.sha256) == std::string(64, 'a'));
  BOOST_TEST_REQUIRE(t.pools.has_value());
  BOOST_TEST(*t.pools == std::vector<std::string>{"alpha"});
  BOOST_TEST(t.max_concurrent == 2u);
}

BOOST_AUTO_TEST_CASE(relative_paths) {
  config_dir d;
  auto l =
      d.load("state_dir = \"state\"\n" + source_policies() + "[audit]\nfile = \"logs/a.jsonl\"\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.config.state_dir == d.path + "/state");
  BOOST_TEST(l.config.audit.file.path == d.path + "/state/logs/a.jsonl");
  auto none = d.load(source_policies() + "[audit]\nfile = \"\"\n");
  BOOST_TEST_REQUIRE(none.ok(), all_errors(none));
  BOOST_TEST(none.config.audit.file.path.empty());
  auto abs = d.load(source_policies() + "[audit]\nfile = \"/var/log/c.jsonl\"\n");
  BOOST_TEST(abs.config.audit.file.path == "/var/log/c.jsonl");
  d.write("plain", "");
  auto not_dir = d.load("state_dir = \"plain\"\n" + source_policies());
  BOOST_TEST_REQUIRE(not_dir.errors.size() == 1u, all_errors(not_dir));
  BOOST_TEST(not_dir.errors[0].message == "exists and is not a directory");
}

BOOST_AUTO_TEST_CASE(audit_events_select_records) {
  config_dir d;
  auto l = d.load(source_policies() + "[audit]\nevents = [\"exec_start\", \"connect\", \"*\"]\n");
  BOOST_TEST_REQUIRE(l.ok(), all_errors(l));
  BOOST_TEST(l.config.audit.enabled);
  BOOST_TEST(l.config.audit.events.count("connect") == 1u);
  BOOST_TEST(l.config.audit.events.size() == 3u);
}

BOOST_AUTO_TEST_SUITE_END()
