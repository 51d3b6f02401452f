// The worker-side sandbox spec: JSON round trip, validation errors with JSON
// pointers, the sealed memfd, and the enforcement report's JSON.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "platform/linux/enforcement_report.hpp"
#include "platform/linux/sandbox_spec.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

std::string error_of(const std::string& text) {
  auto r = parse_sandbox_spec(text);
  return r ? std::string("<parsed>") : r.error().message;
}

std::string with(const std::string& pointer, const nlohmann::json& value) {
  auto j = nlohmann::json::parse(to_json(default_sandbox_spec()));
  j[nlohmann::json::json_pointer(pointer)] = value;
  return j.dump();
}

} // namespace

BOOST_AUTO_TEST_SUITE(sandbox_spec_tests)

BOOST_AUTO_TEST_CASE(round_trip_keeps_every_field) {
  default_root_options options;
  options.workspace_source = "/srv/ws";
  sandbox_spec spec = default_sandbox_spec(options);
  spec.landlock.ports = {{8080, landlock_net::connect_tcp}};
  spec.landlock.best_effort = false;
  spec.seccomp.deny = {"uname"};
  spec.seccomp.kill = {"getppid"};
  spec.seccomp.deny_errno = 13;
  spec.root.tmpfs.push_back({"/scratch", 1 << 20, 0700, true});
  spec.loopback_up = false;
  spec.egress_port = 3128;
  spec.egress_fd = 7;
  const std::string text = to_json(spec);
  auto back = parse_sandbox_spec(text);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
  BOOST_TEST(to_json(*back) == text);
  BOOST_TEST(back->root.binds.size() == spec.root.binds.size());
  BOOST_TEST(back->root.workdir == "/workspace");
  BOOST_TEST(back->landlock.ports.at(0).port == 8080);
  BOOST_TEST(back->landlock.paths.size() == spec.landlock.paths.size());
  BOOST_TEST(back->seccomp.deny_errno == 13);
  BOOST_TEST(!back->loopback_up);
  BOOST_TEST(back->egress_port == 3128);
  BOOST_TEST(back->egress_fd == 7);
}

BOOST_AUTO_TEST_CASE(compiled_seccomp_round_trips) {
  sandbox_spec spec = default_sandbox_spec();
  auto compiled = compile_seccomp(spec.seccomp);
  BOOST_REQUIRE_MESSAGE(compiled, (compiled ? "" : compiled.error().describe()));
  spec.seccomp.compiled = std::make_shared<const compiled_seccomp>(*compiled);
  const std::string text = to_json(spec);
  auto back = parse_sandbox_spec(text);
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
  BOOST_REQUIRE(back->seccomp.compiled);
  const auto& c = *back->seccomp.compiled;
  BOOST_REQUIRE(c.rules.size() == compiled->rules.size());
  BOOST_REQUIRE(c.guard.size() == compiled->guard.size());
  for (std::size_t i = 0; i < c.rules.size(); ++i) {
    BOOST_TEST(c.rules[i].code == compiled->rules[i].code);
    BOOST_TEST(c.rules[i].jt == compiled->rules[i].jt);
    BOOST_TEST(c.rules[i].jf == compiled->rules[i].jf);
    BOOST_TEST(c.rules[i].k == compiled->rules[i].k);
  }
  BOOST_TEST(c.report.denied == compiled->report.denied);
  BOOST_TEST(c.report.highest_allowed_nr == compiled->report.highest_allowed_nr);
  BOOST_TEST(to_json(*back) == text);
}

BOOST_AUTO_TEST_CASE(malformed_compiled_seccomp_says_where) {
  sandbox_spec spec = default_sandbox_spec();
  auto compiled = compile_seccomp(spec.seccomp);
  BOOST_REQUIRE(compiled);
  spec.seccomp.compiled = std::make_shared<const compiled_seccomp>(*compiled);
  auto j = nlohmann::json::parse(to_json(spec));
  auto error_with = [&](const std::string& pointer, const nlohmann::json& value) {
    auto copy = j;
    copy[nlohmann::json::json_pointer(pointer)] = value;
    return error_of(copy.dump());
  };
  BOOST_TEST(error_with("/seccomp/compiled/rules/0", nlohmann::json::array({1, 2, 3}))
               .find("/seccomp/compiled/rules/0: expected [code, jt, jf, k]") != std::string::npos);
  BOOST_TEST(error_with("/seccomp/compiled/guard/1/1", 256)
               .find("/seccomp/compiled/guard/1") != std::string::npos);
  BOOST_TEST(error_with("/seccomp/compiled/rules", nlohmann::json::array())
               .find("/seccomp/compiled/rules: expected an array of 1..4096") != std::string::npos);
  BOOST_TEST(error_with("/seccomp/compiled/report/bogus", 1)
               .find("/seccomp/compiled/report/bogus: unknown key") != std::string::npos);
  auto without_guard = j;
  without_guard["seccomp"]["compiled"].erase("guard");
  BOOST_TEST(error_of(without_guard.dump()).find("both programs") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(malformed_specs_say_where) {
  BOOST_TEST(error_of("{").find("not valid JSON") != std::string::npos);
  BOOST_TEST(error_of("[]").find("expected an object") != std::string::npos);
  BOOST_TEST(error_of("{}").find("/version") != std::string::npos);
  BOOST_TEST(error_of(with("/version", 2)).find("/version: expected 1") != std::string::npos);
  BOOST_TEST(error_of(with("/root/bogus", 1)).find("/root/bogus: unknown key") != std::string::npos);
  BOOST_TEST(error_of(with("/root/binds/0/target", 5)).find("/root/binds/0/target: expected a string") !=
             std::string::npos);
  BOOST_TEST(error_of(with("/landlock/paths/0/access/1", "fly"))
               .find("/landlock/paths/0/access/1: unknown right 'fly'") != std::string::npos);
  BOOST_TEST(error_of(with("/landlock/ports", nlohmann::json::array({{{"port", 70000}}})))
               .find("/landlock/ports/0/port") != std::string::npos);
  BOOST_TEST(error_of(with("/seccomp/deny_errno", 0)).find("/seccomp/deny_errno") != std::string::npos);
  BOOST_TEST(error_of(with("/root/binds/0/target", "usr")).find("normalised absolute") !=
             std::string::npos);
  BOOST_TEST(error_of(with("/root/read_only", "yes")).find("/root/read_only: expected a boolean") !=
             std::string::npos);
  BOOST_TEST(error_of(with("/egress_port", 70000)).find("/egress_port") != std::string::npos);
  // A relay port without an inherited socket is refused, not half set up.
  BOOST_TEST(error_of(with("/egress_port", 3128)).find("/egress_fd") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(sealed_memfd_round_trip) {
  const sandbox_spec spec = default_sandbox_spec();
  auto fd = seal_sandbox_spec(spec);
  BOOST_REQUIRE_MESSAGE(fd, (fd ? "" : fd.error().describe()));
  // Nobody can change it any more.
  BOOST_TEST(::write(fd->get(), "x", 1) == -1);
  BOOST_TEST(::ftruncate(fd->get(), 0) == -1);
  auto back = read_sandbox_spec(fd->get());
  BOOST_REQUIRE_MESSAGE(back, (back ? "" : back.error().describe()));
  BOOST_TEST(to_json(*back) == to_json(spec));
  // Twice (pread from 0, the offset does not matter).
  BOOST_TEST(static_cast<bool>(read_sandbox_spec(fd->get())));

  unique_fd loose(::memfd_create("loose", MFD_CLOEXEC | MFD_ALLOW_SEALING));
  const std::string text = to_json(spec);
  BOOST_REQUIRE(::write(loose.get(), text.data(), text.size()) ==
                static_cast<ssize_t>(text.size()));
  auto refused = read_sandbox_spec(loose.get());
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().message.find("not sealed") != std::string::npos);
  unique_fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  BOOST_TEST(!read_sandbox_spec(devnull.get()));
}

BOOST_AUTO_TEST_CASE(enforcement_report_json_lists_each_layer) {
  enforcement_report r;
  r.namespaces_requested = {"user", "pid"};
  r.namespaces_in_force = {"user", "pid"};
  r.network = "none (private network namespace, loopback only)";
  landlock_report ll;
  ll.abi = 7;
  ll.enforced = true;
  ll.handled_fs = landlock_fs::read_file | landlock_fs::read_dir;
  r.landlock_requested = true;
  r.landlock = ll;
  r.seccomp_requested = true;
  const auto j = nlohmann::json::parse(r.to_json());
  BOOST_TEST(j["namespaces"]["in_force"].size() == 2u);
  BOOST_TEST(j["landlock"]["abi"] == 7);
  BOOST_TEST(j["landlock"]["handled_fs"] == nlohmann::json({"read_file", "read_dir"}));
  BOOST_TEST(j["seccomp"]["requested"] == true);
  BOOST_TEST(j["seccomp"]["enforced"] == false);
  BOOST_TEST(j["cgroup"].is_null());
  BOOST_TEST(j["root"].is_null());
}

BOOST_AUTO_TEST_SUITE_END()
