/// The policy actor in a real actor system: serving snapshots and checks,
/// hot reload through inotify (accepted and refused changes), subscribers;
/// the directory watcher thread on its own; snapshots across a serializer.

#define BOOST_TEST_MODULE castellan_policy_actor
#include "support/test_main.hpp"

#include <stdio.h>
#include <stdlib.h>

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <mutex>

#include <caf/all.hpp>
#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/policy/directory_watcher.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/policy_actor.hpp"

using namespace castellan;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

const std::string source_policies = std::string{CASTELLAN_TEST_SOURCE_DIR} + "/policies";

/// A scratch policy directory, removed at the end of the test.
struct temp_dir {
  fs::path path;
  temp_dir() {
    char tmpl[] = "/tmp/castellan-policy-actor-XXXXXX";
    const char* p = ::mkdtemp(tmpl);
    BOOST_REQUIRE(p != nullptr);
    path = p;
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  /// Writes `name` atomically (temporary file + rename), as editors do.
  void write(const std::string& name, const std::string& text) const {
    const fs::path tmp = path / ("." + name + ".tmp");
    std::ofstream{tmp} << text;
    fs::rename(tmp, path / name);
  }
  /// Writes `name` in place (open, write, close: IN_CLOSE_WRITE).
  void overwrite(const std::string& name, const std::string& text) const {
    std::ofstream{path / name} << text;
  }
  void copy_prebuilt() const {
    for (const auto& e : fs::directory_iterator{source_policies})
      if (e.path().extension() == ".json" && e.path().filename() != "schema.json")
        fs::copy_file(e.path(), path / e.path().filename());
  }
  std::string str() const { return path.string(); }
};

struct fixture {
  static caf::actor_system_config& init(caf::actor_system_config& c) {
    prepare_actor_system_config(c);
    return c;
  }
  caf::actor_system_config cfg;
  caf::actor_system sys;
  caf::scoped_actor self;
  fixture() : sys(init(cfg)), self(sys) {}

  policy_actor spawn(const std::string& dir, bool watch) {
    auto hdl = spawn_policy(sys, policy_config{dir, watch});
    BOOST_REQUIRE_MESSAGE(hdl, (hdl ? "" : sys.render(hdl.error())));
    return *hdl;
  }

  template <class T, class... Ts> T ask(const policy_actor& a, Ts&&... xs) {
    T out{};
    bool got = false;
    self->request(a, 5s, std::forward<Ts>(xs)...)
        .receive(
            [&](T& x) {
              out = std::move(x);
              got = true;
            },
            [&](caf::error& err) { BOOST_FAIL("request failed: " << sys.render(err)); });
    BOOST_REQUIRE(got);
    return out;
  }

  /// Sends a request that must fail; returns its error.
  template <class Reply, class... Ts> caf::error ask_error(const policy_actor& a, Ts&&... xs) {
    caf::error out;
    self->request(a, 5s, std::forward<Ts>(xs)...)
        .receive([&](Reply&) { BOOST_FAIL("expected an error"); },
                 [&](caf::error& err) { out = std::move(err); });
    return out;
  }

  void subscribe(const policy_actor& a) {
    self->send(a, subscribe_atom::value, caf::actor_cast<caf::actor>(self));
    // The subscription is in place once a later request is answered.
    ask<policy_status>(a, status_atom::value);
  }

  /// Waits for the next notification about `name` (skipping others).
  template <class T> T await(const std::string& name, std::chrono::seconds timeout = 10s) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      std::optional<T> got;
      bool timed_out = false;
      self->receive(
          [&](T& x) {
            if (x.policy_name == name)
              got = std::move(x);
          },
          [&](const policy_updated&) {}, [&](const policy_rejected&) {},
          caf::after(std::chrono::milliseconds(200)) >> [&] { timed_out = true; });
      if (got)
        return std::move(*got);
      if (std::chrono::steady_clock::now() > deadline) {
        BOOST_FAIL("no notification for " << name);
        return T{};
      }
      (void)timed_out;
    }
  }
};

const char* tiny_policy = R"({"version": 1, "description": "tiny",
  "defaults": {"fs": "deny", "net": "deny", "exec": "deny"},
  "fs": {"rules": [{"action": "allow", "path": "/data", "perms": ["read_file"]}]}})";

const char* tiny_policy_v2 = R"({"version": 1, "description": "tiny, now writable",
  "defaults": {"fs": "deny", "net": "deny", "exec": "deny"},
  "fs": {"rules": [{"action": "allow", "path": "/data", "perms": ["read_file", "write_file"]}]}})";

constexpr uint32_t read_file = policy::to_access(policy::fs_perm::read_file);
constexpr uint32_t write_file = policy::to_access(policy::fs_perm::write_file);

} // namespace

BOOST_FIXTURE_TEST_SUITE(policy_actor, fixture)

BOOST_AUTO_TEST_CASE(loads_directory_and_serves_snapshots) {
  temp_dir d;
  d.copy_prebuilt();
  d.write("broken.json", R"({"version": 1, "defaults": {"fs": "sometimes"}})");
  auto a = spawn(d.str(), false);
  const auto names = ask<std::vector<std::string>>(a, policy_list_atom::value);
  for (const char* n :
       {"anti-escape", "audit", "default", "exec-policy", "fs-allowlist", "lambda-backend",
        "net-egress", "networked", "no-network", "readonly", "strict"})
    BOOST_CHECK_MESSAGE(std::find(names.begin(), names.end(), n) != names.end(), n);
  BOOST_CHECK(std::find(names.begin(), names.end(), "broken") == names.end());
  const auto st = ask<policy_status>(a, status_atom::value);
  BOOST_REQUIRE_EQUAL(st.rejected.size(), 1u);
  BOOST_CHECK_EQUAL(st.rejected[0].policy_name, "broken");
  BOOST_REQUIRE_EQUAL(st.rejected[0].errors.size(), 1u);
  BOOST_CHECK(st.rejected[0].errors[0].find("/defaults/fs") != std::string::npos);
  // A snapshot is the compiled policy itself: checks need no round trip.
  const auto snap = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"lambda-backend"});
  BOOST_REQUIRE(snap);
  BOOST_CHECK_EQUAL(snap->name(), "lambda-backend");
  BOOST_CHECK(snap->check_exec("/bin/sh").verdict == policy::action::deny);
  // The same snapshot is shared, not copied.
  const auto again = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"lambda-backend"});
  BOOST_CHECK(snap.policy.get() == again.policy.get());
  const auto err = ask_error<policy_snapshot>(a, policy_get_atom::value, std::string{"nope"});
  BOOST_CHECK(err == make_error(castellan_errc::no_such_policy, "nope"));
}

BOOST_AUTO_TEST_CASE(checks_as_messages) {
  temp_dir d;
  d.copy_prebuilt();
  auto a = spawn(d.str(), false);
  auto fs_d = ask<policy_decision>(a, fs_check{"default", "/tmp/x", write_file});
  BOOST_CHECK_EQUAL(fs_d.action, "allow");
  BOOST_CHECK_EQUAL(fs_d.rule, "/fs/rules/9");
  BOOST_CHECK_EQUAL(fs_d.origin, d.str() + "/default.json#/fs/rules/9");
  BOOST_CHECK_EQUAL(fs_d.policy, "default");
  auto net_d = ask<policy_decision>(a, net_check{"net-egress", "tcp", "10.0.0.1", 443, ""});
  BOOST_CHECK_EQUAL(net_d.action, "deny");
  BOOST_CHECK_EQUAL(net_d.rule, "/net/rules/2");
  auto warn_d = ask<policy_decision>(a, net_check{"net-egress", "tcp", "8.8.8.8", 25, ""});
  BOOST_CHECK_EQUAL(warn_d.action, "warn");
  auto exec_d = ask<policy_decision>(a, exec_check{"lambda-backend", "/bin/sh", ""});
  BOOST_CHECK_EQUAL(exec_d.action, "deny");
  BOOST_CHECK_EQUAL(exec_d.rule, "default");
  BOOST_CHECK_EQUAL(exec_d.source, "default");
  auto bad = ask<policy_decision>(a, net_check{"default", "icmp", "1.2.3.4", 1, ""});
  BOOST_CHECK_EQUAL(bad.rule, "invalid");
  BOOST_CHECK(ask_error<policy_decision>(a, fs_check{"nope", "/", read_file}) ==
              make_error(castellan_errc::no_such_policy, "nope"));
}

BOOST_AUTO_TEST_CASE(hot_reload_publishes_new_snapshot) {
  temp_dir d;
  auto a = spawn(d.str(), true);
  subscribe(a);
  d.write("tiny.json", tiny_policy);
  const auto first = await<policy_updated>("tiny");
  BOOST_REQUIRE(first.snapshot);
  BOOST_CHECK_EQUAL(first.path, d.str() + "/tiny.json");
  BOOST_CHECK(first.snapshot->check_fs("/data/x", read_file).verdict == policy::action::allow);
  BOOST_CHECK(first.snapshot->check_fs("/data/x", write_file).verdict == policy::action::deny);
  // Written in place this time (IN_CLOSE_WRITE rather than a rename).
  d.overwrite("tiny.json", tiny_policy_v2);
  const auto second = await<policy_updated>("tiny");
  BOOST_CHECK_GT(second.revision, first.revision);
  BOOST_CHECK(second.snapshot->check_fs("/data/x", write_file).verdict == policy::action::allow);
  // The old snapshot is untouched: its holders keep their decisions.
  BOOST_CHECK(first.snapshot->check_fs("/data/x", write_file).verdict == policy::action::deny);
  const auto current = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"});
  BOOST_CHECK(current.policy.get() == second.snapshot.policy.get());
}

BOOST_AUTO_TEST_CASE(a_configmap_style_swap_of_linked_files_is_a_reload) {
  // A Kubernetes ConfigMap volume: each policy file is a link through
  // `..data`, a link to a timestamped directory; an update writes a new
  // directory and renames a new `..data` over the old one. No policy file
  // itself changes, so only the swap says that something did.
  temp_dir d;
  auto version = [&](const std::string& dir_name, const std::string& link_name,
                     const char* text) {
    fs::create_directory(d.path / dir_name);
    std::ofstream{d.path / dir_name / "tiny.json"} << text;
    fs::create_directory_symlink(dir_name, d.path / link_name);
  };
  version("..2026_11_26_01", "..data", tiny_policy);
  fs::create_symlink("..data/tiny.json", d.path / "tiny.json");
  auto a = spawn(d.str(), true);
  subscribe(a);
  const auto first = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"});
  BOOST_REQUIRE(first.policy);
  BOOST_CHECK(first.policy->check_fs("/data/x", write_file).verdict == policy::action::deny);
  // The update, as the kubelet makes it.
  version("..2026_11_26_02", "..data_tmp", tiny_policy_v2);
  fs::rename(d.path / "..data_tmp", d.path / "..data");
  const auto second = await<policy_updated>("tiny");
  BOOST_CHECK_GT(second.revision, first.policy->revision());
  BOOST_CHECK(second.snapshot->check_fs("/data/x", write_file).verdict == policy::action::allow);
  // A key added later is a new link, with no write to its name.
  std::ofstream{d.path / "..2026_11_26_02" / "more.json"} << tiny_policy;
  fs::create_symlink("..data/more.json", d.path / "more.json");
  const auto more = await<policy_updated>("more");
  BOOST_REQUIRE(more.snapshot);
}

BOOST_AUTO_TEST_CASE(a_directory_reached_through_a_swapped_link_is_followed_across_updates) {
  // The ConfigMap's items under a subdirectory: the policy directory is
  // `policies -> ..data/policies`, another directory after every update,
  // and the kubelet removes the old one after each swap.
  temp_dir d;
  auto version = [&](const std::string& dir_name, const char* text) {
    fs::create_directories(d.path / dir_name / "policies");
    std::ofstream{d.path / dir_name / "policies" / "tiny.json"} << text;
  };
  auto swap_to = [&](const std::string& dir_name, const std::string& old_dir) {
    fs::create_directory_symlink(dir_name, d.path / "..data_tmp");
    fs::rename(d.path / "..data_tmp", d.path / "..data");
    fs::remove_all(d.path / old_dir);
  };
  version("..v1", tiny_policy);
  fs::create_directory_symlink("..v1", d.path / "..data");
  fs::create_directory_symlink("..data/policies", d.path / "policies");
  auto a = spawn((d.path / "policies").string(), true);
  subscribe(a);
  const auto first = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"});
  BOOST_REQUIRE(first.policy);
  version("..v2", tiny_policy_v2);
  swap_to("..v2", "..v1");
  const auto second = await<policy_updated>("tiny");
  BOOST_CHECK(second.snapshot->check_fs("/data/x", write_file).verdict == policy::action::allow);
  // The second update is seen too: the watch followed the path.
  version("..v3", tiny_policy);
  swap_to("..v3", "..v2");
  const auto third = await<policy_updated>("tiny");
  BOOST_CHECK_GT(third.revision, second.revision);
  BOOST_CHECK(third.snapshot->check_fs("/data/x", write_file).verdict == policy::action::deny);
}

BOOST_AUTO_TEST_CASE(a_policy_hard_linked_into_place_is_a_reload) {
  // `ln staged.json dir/tiny.json` makes only IN_CREATE, with the content
  // already there.
  temp_dir d;
  temp_dir staging;
  auto a = spawn(d.str(), true);
  subscribe(a);
  std::ofstream{staging.path / "tiny.json"} << tiny_policy;
  fs::create_hard_link(staging.path / "tiny.json", d.path / "tiny.json");
  const auto got = await<policy_updated>("tiny");
  BOOST_REQUIRE(got.snapshot);
}

BOOST_AUTO_TEST_CASE(invalid_reload_keeps_old_policy) {
  temp_dir d;
  d.write("tiny.json", tiny_policy);
  auto a = spawn(d.str(), true);
  subscribe(a);
  const auto before = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"});
  BOOST_REQUIRE(before);
  d.write("tiny.json", R"({"version": 1, "fs": {"rules": [
    {"action": "allow", "path": "relative", "perms": ["read_file"]}]}})");
  const auto rejected = await<policy_rejected>("tiny");
  BOOST_CHECK_EQUAL(rejected.path, d.str() + "/tiny.json");
  BOOST_REQUIRE_EQUAL(rejected.errors.size(), 1u);
  BOOST_CHECK(rejected.errors[0].find("/fs/rules/0/path") != std::string::npos);
  BOOST_CHECK_GT(rejected.timestamp_ns, 0);
  const auto after = ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"});
  BOOST_CHECK(after.policy.get() == before.policy.get());
  auto dec = ask<policy_decision>(a, fs_check{"tiny", "/data/x", read_file});
  BOOST_CHECK_EQUAL(dec.action, "allow");
  // Syntax errors too; and saving the same broken file again is reported again.
  d.overwrite("tiny.json", "{\"version\": 1,");
  const auto syntax = await<policy_rejected>("tiny");
  BOOST_CHECK(syntax.errors[0].find("parse error") != std::string::npos);
  d.overwrite("tiny.json", "{\"version\": 1,");
  await<policy_rejected>("tiny");
  // A fixed file is accepted again.
  d.write("tiny.json", tiny_policy_v2);
  const auto fixed = await<policy_updated>("tiny");
  BOOST_CHECK(fixed.snapshot->check_fs("/data/x", write_file).verdict == policy::action::allow);
  BOOST_CHECK(ask<policy_status>(a, status_atom::value).rejected.empty());
}

BOOST_AUTO_TEST_CASE(dependents_follow_their_base) {
  temp_dir d;
  d.write("base.json", tiny_policy);
  d.write("child.json", R"({"version": 1, "extends": ["base"],
    "exec": {"rules": [{"action": "allow", "path": "/usr/bin/python3"}]}})");
  auto a = spawn(d.str(), true);
  subscribe(a);
  d.write("base.json", tiny_policy_v2);
  const auto child = await<policy_updated>("child");
  BOOST_CHECK(child.snapshot->check_fs("/data/x", write_file).verdict == policy::action::allow);
  // A broken base refuses the child too; both keep their last good versions.
  d.write("base.json", R"({"version": 2})");
  const auto rejected = await<policy_rejected>("child");
  BOOST_CHECK(rejected.errors[0].find("base.json") != std::string::npos);
  auto dec = ask<policy_decision>(a, fs_check{"child", "/data/x", write_file});
  BOOST_CHECK_EQUAL(dec.action, "allow");
}

BOOST_AUTO_TEST_CASE(removed_file_keeps_policy) {
  temp_dir d;
  d.write("tiny.json", tiny_policy);
  auto a = spawn(d.str(), true);
  subscribe(a);
  fs::remove(d.path / "tiny.json");
  const auto rejected = await<policy_rejected>("tiny");
  BOOST_CHECK(rejected.errors[0].find("file removed") != std::string::npos);
  BOOST_CHECK(ask<policy_snapshot>(a, policy_get_atom::value, std::string{"tiny"}));
}

BOOST_AUTO_TEST_CASE(put_and_explicit_reload) {
  temp_dir d;
  d.copy_prebuilt();
  auto a = spawn(d.str(), false);
  const auto snap = ask<policy_snapshot>(a, policy_put_atom::value, std::string{"mine"},
                                         std::string{R"({"version": 1, "extends": ["default"],
      "fs": {"rules": [{"action": "allow", "path": "/srv", "perms": ["read_file"]}]}})"});
  BOOST_REQUIRE(snap);
  BOOST_CHECK_EQUAL(snap->check_fs("/srv/x", read_file).pointer, "/fs/rules/10");
  BOOST_CHECK_EQUAL(snap->check_fs("/usr/x", read_file).pointer, "/fs/rules/0");
  self->request(a, 5s, policy_put_atom::value, std::string{"bad"}, std::string{"{}"})
      .receive([&](const policy_snapshot&) { BOOST_FAIL("accepted an invalid policy"); },
               [&](caf::error& err) {
                 BOOST_CHECK(err.category() == caf::atom("castellan"));
                 BOOST_CHECK(sys.render(err).find("version") != std::string::npos);
               });
  // Without a watcher, a reload request picks up changes.
  d.write("tiny.json", tiny_policy);
  const auto st = ask<policy_status>(a, policy_reload_atom::value);
  BOOST_CHECK(std::find_if(st.loaded.begin(), st.loaded.end(), [](const std::string& s) {
                return s.rfind("tiny@", 0) == 0;
              }) != st.loaded.end());
}

BOOST_AUTO_TEST_CASE(missing_directory_fails_spawn) {
  auto hdl = spawn_policy(sys, policy_config{"/nonexistent/castellan/policies", true});
  BOOST_CHECK(!hdl);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(directory_watcher)

BOOST_AUTO_TEST_CASE(reports_policy_files_only) {
  temp_dir d;
  std::mutex mtx;
  std::condition_variable cv;
  std::vector<std::string> seen;
  auto w = castellan::directory_watcher::start(d.str(), [&](const std::string& f) {
    std::lock_guard<std::mutex> guard{mtx};
    seen.push_back(f);
    cv.notify_all();
  });
  BOOST_REQUIRE_MESSAGE(w, (w ? "" : w.error().describe()));
  d.overwrite("notes.txt", "x");
  d.overwrite("schema.json", "{}");
  d.overwrite("a.json", "{}");
  d.write("b.json", "{}");
  {
    std::unique_lock<std::mutex> lock{mtx};
    BOOST_REQUIRE(cv.wait_for(lock, 5s, [&] {
      return std::count(seen.begin(), seen.end(), "a.json") > 0 &&
             std::count(seen.begin(), seen.end(), "b.json") > 0;
    }));
    BOOST_CHECK(std::count(seen.begin(), seen.end(), "notes.txt") == 0);
    BOOST_CHECK(std::count(seen.begin(), seen.end(), "schema.json") == 0);
    BOOST_CHECK(std::count(seen.begin(), seen.end(), ".b.json.tmp") == 0);
  }
  // Stopping joins the thread promptly.
  const auto t0 = std::chrono::steady_clock::now();
  w->reset();
  BOOST_CHECK(std::chrono::steady_clock::now() - t0 < 1s);
}

BOOST_AUTO_TEST_CASE(a_callback_may_destroy_its_own_watcher) {
  // The policy actor's state owns its watcher, and the callback's message
  // can drop the actor's last reference: the watcher is then destroyed on its
  // own thread, which must neither join itself nor use what it freed.
  temp_dir d;
  std::mutex mtx;
  std::condition_variable cv;
  std::unique_ptr<castellan::directory_watcher> holder;
  bool destroyed = false;
  auto w = castellan::directory_watcher::start(d.str(), [&](const std::string&) {
    std::unique_ptr<castellan::directory_watcher> mine;
    {
      std::lock_guard<std::mutex> guard{mtx};
      mine = std::move(holder);
    }
    mine.reset(); // on the watcher thread
    std::lock_guard<std::mutex> guard{mtx};
    destroyed = true;
    cv.notify_all();
  });
  BOOST_REQUIRE_MESSAGE(w, (w ? "" : w.error().describe()));
  {
    std::lock_guard<std::mutex> guard{mtx};
    holder = std::move(*w);
  }
  d.overwrite("a.json", "{}");
  std::unique_lock<std::mutex> lock{mtx};
  BOOST_REQUIRE(cv.wait_for(lock, 30s, [&] { return destroyed; }));
  BOOST_CHECK(!holder);
}

BOOST_AUTO_TEST_CASE(unwatchable_directory_fails) {
  auto w = castellan::directory_watcher::start("/nonexistent/dir", [](const std::string&) {});
  BOOST_REQUIRE(!w);
  BOOST_CHECK_EQUAL(w.error().code, ENOENT);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_FIXTURE_TEST_SUITE(policy_snapshot_messages, fixture)

BOOST_AUTO_TEST_CASE(snapshot_crosses_a_serializer) {
  auto doc = policy::load_policy(source_policies + "/lambda-backend.json", source_policies);
  BOOST_REQUIRE(doc.has_value());
  policy_updated msg;
  msg.policy_name = "lambda-backend";
  msg.revision = 7;
  msg.snapshot.policy = policy::compiled_policy::compile(std::move(*doc), "lambda-backend", 7);
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  BOOST_REQUIRE(!sink(msg));
  policy_updated copy;
  caf::binary_deserializer source{sys, buf};
  BOOST_REQUIRE(!source(copy));
  BOOST_REQUIRE(copy.snapshot);
  BOOST_CHECK_EQUAL(copy.snapshot->name(), "lambda-backend");
  BOOST_CHECK_EQUAL(copy.snapshot->revision(), 7u);
  BOOST_CHECK_EQUAL(copy.snapshot->json_text(), msg.snapshot->json_text());
  BOOST_CHECK(copy.snapshot->check_net(policy::net_proto::tcp, "10.0.0.1", 443) ==
              msg.snapshot->check_net(policy::net_proto::tcp, "10.0.0.1", 443));
  // The printable form (CAF's to_string) works too.
  BOOST_CHECK(caf::deep_to_string(msg).find("policy_updated") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(tampered_snapshot_is_refused) {
  policy_snapshot x;
  const auto err = restore_policy_snapshot(x, "evil", 1, R"({"version": 1, "fs": {"rules": [
    {"action": "allow", "path": "no-slash", "perms": ["read_file"]}]}})");
  BOOST_CHECK(err);
  BOOST_CHECK(!x);
}

BOOST_AUTO_TEST_SUITE_END()
