/// Merging policies and resolving `extends` (with cycle detection).

#include <boost/test/unit_test.hpp>

#include <stdlib.h>
#include <fcntl.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/merge.hpp"
#include "policy_test_support.hpp"

using namespace castellan::policy;
namespace t = castellan::policy::test;
namespace fs = std::filesystem;

namespace {

policy_document parse(const std::string& text, const std::string& file = "<test>") {
  auto doc = parse_policy(text, file);
  BOOST_REQUIRE_MESSAGE(doc.has_value(), (doc ? "" : t::errors_of(doc.errors())));
  return *doc;
}

/// A scratch policy directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    char tmpl[] = "/tmp/castellan-policy-test-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    BOOST_REQUIRE(p != nullptr);
    path = p;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string write(const std::string& name, const std::string& text) const {
    const fs::path file = path / name;
    fs::create_directories(file.parent_path());
    std::ofstream{file} << text;
    return file.string();
  }
  std::string str() const { return path.string(); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(merge_extends)

// The reference's merge example: the result must be exactly its JSON.
BOOST_AUTO_TEST_CASE(reference_merge_example) {
  const auto policy1 = parse(R"({
    "version": 1,
    "plugins": { "namespaces": false, "landlock": false, "seccomp": false },
    "defaults": { "fs": "allow", "net": "allow", "exec": "allow" },
    "fs": { "rules": [ { "action": "allow", "path": "/tmp", "perms": ["read_file"] } ] }
  })");
  const auto policy2 = parse(R"({
    "version": 1,
    "plugins": { "namespaces": true, "landlock": true, "seccomp": true },
    "defaults": { "fs": "deny", "net": "allow", "exec": "deny" },
    "fs": { "rules": [ { "action": "allow", "path": "/app", "perms": ["read_file"] } ] }
  })");
  const auto expected = nlohmann::ordered_json::parse(R"({
    "version": 1,
    "plugins": { "namespaces": true, "landlock": true, "seccomp": true },
    "defaults": { "fs": "deny", "net": "allow", "exec": "deny" },
    "fs": { "rules": [
      { "action": "allow", "path": "/tmp", "perms": ["read_file"] },
      { "action": "allow", "path": "/app", "perms": ["read_file"] }
    ] }
  })");
  BOOST_CHECK_EQUAL(to_json(merge_policies({policy1, policy2})).dump(), expected.dump());
}

BOOST_AUTO_TEST_CASE(defaults_most_restrictive) {
  const auto a = parse(R"({"version": 1, "defaults": {"fs": "allow", "net": "warn"}})");
  const auto b = parse(R"({"version": 1, "defaults": {"fs": "warn", "net": "allow"}})");
  const auto c = parse(R"({"version": 1, "defaults": {"exec": "allow"}})");
  const auto m = merge_policies({a, b, c});
  BOOST_CHECK(m.defaults.fs == action::warn);
  BOOST_CHECK(m.defaults.net == action::warn);
  BOOST_CHECK(m.defaults.exec == action::allow); // absent elsewhere: no opinion
  const auto d = parse(R"({"version": 1, "defaults": {"fs": "deny"}})");
  BOOST_CHECK(merge_policies({a, d}).defaults.fs == action::deny);
  // A domain no layer mentions is denied.
  BOOST_CHECK(!merge_policies({a}).defaults.exec.has_value());
  BOOST_CHECK(merge_policies({a}).effective_exec_default() == action::deny);
}

BOOST_AUTO_TEST_CASE(rules_concatenate_sets_union_limits_minimum) {
  const auto a = parse(R"({"version": 1,
    "plugins": {"landlock": {"enabled": true, "best_effort": true}, "seccomp": false,
                "cgroups": {"best_effort": true}},
    "net": {"rules": [{"action": "deny", "proto": "tcp", "cidr": "10.0.0.0/8", "ports": "0-65535"}],
            "hosts": {"deny": ["a.example"], "allow": ["x.example"]}},
    "exec": {"rules": [{"action": "allow", "path": "/bin/a"}]},
    "antiEscape": {"denySyscalls": ["ptrace", "bpf"]},
    "audit": {"enabled": false, "events": ["openat"]},
    "limits": {"timeout_ms": 1000, "memory_bytes": 2097152}})");
  const auto b = parse(R"({"version": 1,
    "plugins": {"landlock": true, "seccomp": {"enabled": false, "best_effort": true},
                "cgroups": {"enabled": true, "best_effort": true}},
    "net": {"rules": [{"action": "allow", "proto": "udp", "cidr": "0.0.0.0/0", "ports": "53"}],
            "hosts": {"deny": ["a.example", "b.example"], "allow": ["y.example"]}},
    "exec": {"rules": [{"action": "allow", "path": "/bin/b"}]},
    "antiEscape": {"denySyscalls": ["bpf", "mount"]},
    "audit": {"enabled": true, "events": ["openat", "execve"]},
    "limits": {"timeout_ms": 500, "pids": 10}})");
  const auto m = merge_policies({a, b});
  BOOST_REQUIRE_EQUAL(m.net_rules.size(), 2u);
  BOOST_CHECK_EQUAL(m.net_rules[0].cidr_text, "10.0.0.0/8");
  BOOST_CHECK_EQUAL(m.net_rules[1].ports_text, "53");
  BOOST_REQUIRE_EQUAL(m.exec_rules.size(), 2u);
  BOOST_CHECK_EQUAL(m.exec_rules[1].path, "/bin/b");
  BOOST_CHECK((m.deny_syscalls == std::vector<std::string>{"ptrace", "bpf", "mount"}));
  BOOST_CHECK((m.audit.events == std::vector<std::string>{"openat", "execve"}));
  BOOST_CHECK(m.audit.enabled == true);
  BOOST_CHECK((m.hosts.deny == std::vector<std::string>{"a.example", "b.example"}));
  BOOST_REQUIRE(m.hosts.allow.has_value());
  BOOST_CHECK((*m.hosts.allow == std::vector<std::string>{"x.example", "y.example"}));
  BOOST_CHECK_EQUAL(*m.limits.timeout_ms, 500u);
  BOOST_CHECK_EQUAL(*m.limits.memory_bytes, 2097152u);
  BOOST_CHECK_EQUAL(*m.limits.pids, 10u);
  BOOST_CHECK(!m.limits.code_bytes.has_value());
  BOOST_CHECK(m.plugins.landlock->enabled);
  BOOST_CHECK(!m.plugins.landlock->best_effort); // strict wins
  BOOST_CHECK(!m.plugins.seccomp->enabled);      // false OR false
  BOOST_CHECK(m.plugins.cgroups->enabled);
  BOOST_CHECK(m.plugins.cgroups->best_effort);   // every layer says best effort
  BOOST_CHECK(!merge_policies({a, parse(R"({"version": 1, "plugins": {"cgroups": true}})")})
                 .plugins.cgroups->best_effort);
  BOOST_CHECK(!m.plugins.namespaces.has_value());
  BOOST_CHECK(m.effective(m.plugins.namespaces).enabled);
  // An allow list in any layer stays: a layer without one does not lift it.
  const auto c = parse(R"({"version": 1})");
  BOOST_CHECK(merge_policies({c, a}).hosts.allow.has_value());
  BOOST_CHECK(!merge_policies({c, c}).hosts.allow.has_value());
}

BOOST_AUTO_TEST_CASE(extends_by_name_and_path) {
  temp_dir d;
  d.write("base.json", R"({"version": 1, "description": "base",
    "defaults": {"fs": "deny", "net": "allow"},
    "fs": {"rules": [{"action": "allow", "path": "/usr", "perms": ["read_file"]}]},
    "limits": {"timeout_ms": 9000}})");
  d.write("shared/extra.json", R"({"version": 1,
    "fs": {"rules": [{"action": "deny", "path": "/usr/secret", "perms": ["read_file"]}]}})");
  const auto top = d.write("top.json", R"({"version": 1, "description": "top",
    "extends": ["base", "shared/extra.json"],
    "fs": {"rules": [{"action": "allow", "path": "/tmp", "perms": ["read_file"]}]},
    "limits": {"timeout_ms": 20000}})");
  auto doc = load_policy(top, d.str());
  BOOST_REQUIRE_MESSAGE(doc.has_value(), (doc ? "" : t::errors_of(doc.errors())));
  BOOST_CHECK_EQUAL(doc->description, "top");
  BOOST_CHECK(doc->extends.empty());
  BOOST_REQUIRE_EQUAL(doc->fs_rules.size(), 3u);
  // Extended policies come first, in the order listed.
  BOOST_CHECK_EQUAL(doc->fs_rules[0].path, "/usr");
  BOOST_CHECK_EQUAL(doc->fs_rules[1].path, "/usr/secret");
  BOOST_CHECK_EQUAL(doc->fs_rules[2].path, "/tmp");
  BOOST_CHECK_EQUAL(doc->fs_rules[0].origin, d.str() + "/base.json#/fs/rules/0");
  BOOST_CHECK_EQUAL(doc->fs_rules[1].origin, d.str() + "/shared/extra.json#/fs/rules/0");
  BOOST_CHECK_EQUAL(*doc->limits.timeout_ms, 9000u); // the minimum
  auto p = t::make_evaluators(*doc);
  BOOST_CHECK_EQUAL(p.fs("/usr/secret/x", to_access(fs_perm::read_file)).pointer, "/fs/rules/1");
  BOOST_CHECK_EQUAL(p.fs("/usr/lib", to_access(fs_perm::read_file)).pointer, "/fs/rules/0");
  // Relative paths resolve from the extending file's directory.
  d.write("shared/leaf.json", R"({"version": 1, "extends": ["../base.json"]})");
  auto leaf = load_policy(d.str() + "/shared/leaf.json", d.str());
  BOOST_REQUIRE(leaf.has_value());
  BOOST_CHECK_EQUAL(leaf->fs_rules.size(), 1u);
}

BOOST_AUTO_TEST_CASE(extends_diamond_merges_once) {
  temp_dir d;
  d.write("root.json", R"({"version": 1,
    "fs": {"rules": [{"action": "allow", "path": "/r", "perms": ["read_file"]}]}})");
  d.write("left.json", R"({"version": 1, "extends": ["root"]})");
  d.write("right.json", R"({"version": 1, "extends": ["root"]})");
  const auto top = d.write("top.json", R"({"version": 1, "extends": ["left", "right"]})");
  auto layers = load_policy_layers(top, d.str());
  BOOST_REQUIRE(layers.has_value());
  BOOST_CHECK_EQUAL(layers->size(), 4u); // root, left, right, top
  auto doc = load_policy(top, d.str());
  BOOST_REQUIRE(doc.has_value());
  BOOST_CHECK_EQUAL(doc->fs_rules.size(), 1u);
}

BOOST_AUTO_TEST_CASE(extends_cycles_are_named) {
  temp_dir d;
  d.write("a.json", R"({"version": 1, "extends": ["b"]})");
  d.write("b.json", R"({"version": 1, "extends": ["c"]})");
  d.write("c.json", R"({"version": 1, "extends": ["a"]})");
  auto doc = load_policy(d.str() + "/a.json", d.str());
  BOOST_REQUIRE(!doc.has_value());
  const auto& e = doc.errors().front();
  BOOST_CHECK_EQUAL(e.file, d.str() + "/c.json");
  BOOST_CHECK_EQUAL(e.pointer, "/extends/0");
  BOOST_CHECK_EQUAL(e.message, "extends cycle: " + d.str() + "/a.json -> " + d.str() +
                                   "/b.json -> " + d.str() + "/c.json -> " + d.str() +
                                   "/a.json (extends)");
  // A policy that extends itself.
  d.write("self.json", R"({"version": 1, "extends": ["self.json"]})");
  auto self = load_policy(d.str() + "/self.json", d.str());
  BOOST_REQUIRE(!self.has_value());
  BOOST_CHECK(self.errors().front().message.find("extends cycle") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(extends_errors_name_the_broken_file) {
  temp_dir d;
  d.write("broken.json", R"({"version": 1, "defaults": {"fs": "maybe"}})");
  const auto top = d.write("top.json", R"({"version": 1, "extends": ["broken", "missing"]})");
  auto doc = load_policy(top, d.str());
  BOOST_REQUIRE(!doc.has_value());
  BOOST_CHECK_EQUAL(doc.errors().front().file, d.str() + "/broken.json");
  BOOST_CHECK_EQUAL(doc.errors().front().pointer, "/defaults/fs");
  // A FIFO named like a policy is refused, not waited on.
  BOOST_REQUIRE_EQUAL(::mkfifo((d.path / "pipe.json").c_str(), 0600), 0);
  const auto via_pipe = d.write("via-pipe.json", R"({"version": 1, "extends": ["pipe"]})");
  auto piped = load_policy(via_pipe, d.str());
  BOOST_REQUIRE(!piped.has_value());
  BOOST_CHECK_EQUAL(piped.errors().front().message, "not a regular file");
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_regular_is_refused_without_being_opened) {
  // Opening a device has effects of its own (a watchdog arms): the type is
  // checked first. inotify reports every real open (IN_OPEN), and none of
  // the loader's, of a FIFO behind a link named like a policy.
  temp_dir d;
  const auto fifo = d.path / "fifo";
  BOOST_REQUIRE_EQUAL(::mkfifo(fifo.c_str(), 0600), 0);
  std::filesystem::create_symlink(fifo, d.path / "device.json");
  const int in = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  BOOST_REQUIRE(in >= 0);
  BOOST_REQUIRE(::inotify_add_watch(in, fifo.c_str(), IN_OPEN) >= 0);
  auto doc = load_policy((d.path / "device.json").string(), d.str());
  BOOST_REQUIRE(!doc.has_value());
  BOOST_CHECK_EQUAL(doc.errors().front().message, "not a regular file");
  alignas(inotify_event) char buf[4096];
  BOOST_CHECK_EQUAL(::read(in, buf, sizeof(buf)), -1); // no event: EAGAIN
  // The check itself works: a real open is seen.
  const int fd = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  BOOST_REQUIRE(fd >= 0);
  BOOST_CHECK(::read(in, buf, sizeof(buf)) > 0);
  ::close(fd);
  ::close(in);
}

BOOST_AUTO_TEST_CASE(extends_cannot_loosen) {
  // deny defaults and deny rules of an extended policy survive the extension.
  temp_dir d;
  d.write("base.json", R"({"version": 1, "defaults": {"net": "deny"},
    "net": {"rules": [{"action": "deny", "proto": "tcp", "cidr": "0.0.0.0/0", "ports": "22"}]}})");
  const auto top = d.write("top.json", R"({"version": 1, "extends": ["base"],
    "defaults": {"net": "allow"},
    "net": {"rules": [{"action": "allow", "proto": "tcp", "cidr": "0.0.0.0/0", "ports": "0-65535"}]}})");
  auto doc = load_policy(top, d.str());
  BOOST_REQUIRE(doc.has_value());
  auto p = t::make_evaluators(*doc);
  BOOST_CHECK_EQUAL(p.net(net_proto::tcp, "1.2.3.4", 22).pointer, "/net/rules/0");
  BOOST_CHECK_EQUAL(p.net(net_proto::tcp, "1.2.3.4", 443).pointer, "/net/rules/1");
  BOOST_CHECK_EQUAL(p.net(net_proto::udp, "1.2.3.4", 53).verdict, action::deny);
}

BOOST_AUTO_TEST_SUITE_END()
