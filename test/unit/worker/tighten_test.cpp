/// The TIGHTEN frame (docs/wire.md): in fork mode the child forked for the
/// next CODE narrows itself with an extra Landlock ruleset and seccomp
/// filter before the code runs; anything that cannot be applied exactly
/// refuses the request without running the code; the zygote and the next
/// exec are untouched.

#include <boost/test/unit_test.hpp>

#include <sys/utsname.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "platform/linux/landlock.hpp"
#include "platform/linux/seccomp_export.hpp"
#include "support/build_paths.hpp"
#include "support/run_process.hpp"
#include "worker_process.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::test;
using json = nlohmann::json;

namespace {

std::string base64(const std::string& in) {
  static constexpr char table[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  std::size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const auto n = (uint32_t{static_cast<uint8_t>(in[i])} << 16) |
                   (uint32_t{static_cast<uint8_t>(in[i + 1])} << 8) |
                   uint32_t{static_cast<uint8_t>(in[i + 2])};
    for (int s = 18; s >= 0; s -= 6)
      out.push_back(table[(n >> s) & 63]);
  }
  if (i < in.size()) {
    uint32_t n = uint32_t{static_cast<uint8_t>(in[i])} << 16;
    if (i + 1 < in.size())
      n |= uint32_t{static_cast<uint8_t>(in[i + 1])} << 8;
    out.push_back(table[(n >> 18) & 63]);
    out.push_back(table[(n >> 12) & 63]);
    out.push_back(i + 1 < in.size() ? table[(n >> 6) & 63] : '=');
    out.push_back('=');
  }
  return out;
}

std::string machine() {
  utsname u{};
  ::uname(&u);
  return u.machine;
}

/// A description that grants reading and running /usr and reading /proc,
/// nothing else (no /etc), and no seccomp filter.
json usr_only() {
  namespace fs = platform::landlock_fs;
  json landlock = {
      {"best_effort", false},
      {"require_net", false},
      {"handled_fs", fs::all},
      {"handled_net", platform::landlock_net::all},
      {"scoped", platform::landlock_scope::all},
      {"paths",
       json::array(
           {{{"path", "/usr"}, {"access", fs::read_execute}, {"optional", false}},
            {{"path", "/proc"}, {"access", fs::read_file | fs::read_dir}, {"optional", false}},
            {{"path", "/no/such/dir"}, {"access", fs::read_file}, {"optional", true}}})},
      {"ports", json::array()}};
  return {{"version", 1},
          {"policy", "policy-test"},
          {"arch", machine()},
          {"landlock", landlock},
          {"seccomp", nullptr}};
}

const char* const read_passwd = R"(
try:
    open('/etc/passwd').read()
    print('read')
except PermissionError as e:
    print('denied', e.errno)
)";

exec_output tightened(worker_process& w, uint32_t id, const json& desc, const std::string& code) {
  w.send(ipc::message_type::tighten, id, desc.dump());
  return w.run(ipc::message_type::code, id, code);
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_tighten)

BOOST_AUTO_TEST_CASE(landlock_narrows_the_exec_and_only_it) {
  if (platform::landlock_abi() == 0) {
    castellan::test::skip("the kernel has no Landlock");
    return;
  }
  worker_process w({"--mode", "fork"});
  auto before = w.run_code(read_passwd);
  BOOST_REQUIRE_MESSAGE(before.complete, before.problem);
  BOOST_TEST(before.out == "read\n");

  auto narrowed = tightened(w, 100, usr_only(), read_passwd);
  BOOST_REQUIRE_MESSAGE(narrowed.complete, narrowed.problem);
  BOOST_TEST(narrowed.out == "denied 13\n");
  BOOST_TEST(narrowed.result["exit_code"] == 0);
  const auto& report = narrowed.result["tightening"];
  BOOST_TEST(report["policy"] == "policy-test");
  BOOST_TEST(report["landlock"]["enforced"] == true);
  BOOST_TEST(report["landlock"]["path_rules"] == 2);
  BOOST_TEST(report["landlock"]["skipped_paths"] == json::array({"/no/such/dir"}));

  auto after = w.run_code(read_passwd);
  BOOST_REQUIRE_MESSAGE(after.complete, after.problem);
  BOOST_TEST(after.out == "read\n");
  BOOST_TEST(!after.result.contains("tightening"));
}

BOOST_AUTO_TEST_CASE(no_exec_process_holds_a_ruleset) {
  if (platform::landlock_abi() == 0) {
    castellan::test::skip("the kernel has no Landlock");
    return;
  }
  // A process holding a Landlock ruleset fd could add rules to it: the
  // zygote builds it, the narrowed child closes it before the code runs,
  // and the zygote closes its own copy once it has forked.
  const char* const code = R"(
import os
held = []
for fd in os.listdir('/proc/self/fd'):
    try:
        held.append(os.readlink('/proc/self/fd/' + fd))
    except OSError:
        pass  # the directory listing's own fd, closed since
print(len(held) > 2, sum('landlock' in h for h in held))
)";
  worker_process w({"--mode", "fork"});
  auto narrowed = tightened(w, 40, usr_only(), code);
  BOOST_REQUIRE_MESSAGE(narrowed.complete, narrowed.problem);
  BOOST_TEST(narrowed.out == "True 0\n", narrowed.out + narrowed.err);
  BOOST_TEST(narrowed.result["tightening"]["landlock"]["enforced"] == true);
  auto plain = w.run_code(code);
  BOOST_TEST(plain.out == "True 0\n", plain.out + plain.err);
  // The zygote itself: nothing left open either.
  std::string zygote;
  const std::string dir = "/proc/" + std::to_string(w.harness_pid()) + "/fd";
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    std::error_code ec;
    zygote += std::filesystem::read_symlink(e.path(), ec).string() + "\n";
  }
  BOOST_TEST(zygote.find("landlock") == std::string::npos, zygote);
}

BOOST_AUTO_TEST_CASE(a_seccomp_program_denies_in_the_exec_only) {
  auto filter = platform::export_seccomp_filter({"uname"}, {});
  BOOST_REQUIRE(filter);
  json desc = {
      {"version", 1},
      {"policy", "policy-test"},
      {"arch", machine()},
      {"landlock", nullptr},
      {"seccomp",
       {{"program", base64(filter->program)}, {"denied", {"uname"}}, {"killed", json::array()}}}};
  const char* const code = R"(
import os
try:
    os.uname()
    print('uname ok')
except PermissionError as e:
    print('uname', e.errno)
)";
  worker_process w({"--mode", "fork"});
  auto narrowed = tightened(w, 7, desc, code);
  BOOST_REQUIRE_MESSAGE(narrowed.complete, narrowed.problem);
  BOOST_TEST(narrowed.out == "uname 1\n");
  BOOST_TEST(narrowed.result["tightening"]["seccomp"]["enforced"] == true);
  auto after = w.run_code(code);
  BOOST_TEST(after.out == "uname ok\n");
}

BOOST_AUTO_TEST_CASE(what_cannot_be_applied_is_refused_and_the_code_never_runs) {
  worker_process w({"--mode", "fork"});
  const std::string code = "print('ran')";
  auto refused = [&](uint32_t id, const std::string& payload, const std::string& reason) {
    w.send(ipc::message_type::tighten, id, payload);
    auto r = w.run(ipc::message_type::code, id, code);
    BOOST_REQUIRE_MESSAGE(r.complete, r.problem);
    BOOST_TEST(r.out.empty(), "the code ran despite: " << reason);
    BOOST_TEST(r.result["exit_code"] == 126);
    const std::string why = r.result.value("refused", "");
    BOOST_TEST(why.find(reason) != std::string::npos,
               "refusal '" << why << "' lacks '" << reason << "'");
  };
  refused(1, "not json", "not JSON");
  auto unknown = usr_only();
  unknown["extra"] = 1;
  refused(2, unknown.dump(), "unknown field(s) extra");
  auto arch = usr_only();
  arch["arch"] = "pdp11";
  refused(3, arch.dump(), "for pdp11");
  auto missing = usr_only();
  missing["landlock"]["paths"][2]["optional"] = false;
  refused(4, missing.dump(), "/no/such/dir");
  auto rights = usr_only();
  rights["landlock"]["handled_fs"] = 1ull << 40;
  refused(5, rights.dump(), "rights this harness does not know");
  auto many = usr_only();
  for (int i = 0; i < 4096; ++i)
    many["landlock"]["paths"].push_back(many["landlock"]["paths"][0]);
  refused(8, many.dump(), "more than 4096 path rules");
  auto program = usr_only();
  program["seccomp"] = {{"program", "AAAA"}, {"denied", json::array()}, {"killed", json::array()}};
  refused(6, program.dump(), "is not 1..4096 instructions");
  auto garbage = usr_only();
  garbage["landlock"] = nullptr;
  garbage["seccomp"] = {{"program", base64(std::string(16, '\xff'))},
                        {"denied", json::array()},
                        {"killed", json::array()}};
  refused(7, garbage.dump(), "PR_SET_SECCOMP");
  // The zygote is fine: the next request runs.
  auto next = w.run_code(code);
  BOOST_TEST(next.out == "ran\n");
}

BOOST_AUTO_TEST_CASE(reuse_mode_refuses_a_tightening) {
  worker_process w; // reuse: the warm interpreter would keep the restrictions
  w.send(ipc::message_type::tighten, 5, usr_only().dump());
  auto r = w.run(ipc::message_type::code, 5, "print('ran')");
  BOOST_REQUIRE_MESSAGE(r.complete, r.problem);
  BOOST_TEST(r.out.empty());
  BOOST_TEST(r.result.value("refused", "").find("fork mode") != std::string::npos);
  auto next = w.run_code(read_passwd);
  BOOST_TEST(next.out == "read\n");
}

BOOST_AUTO_TEST_CASE(a_tighten_frame_for_another_request_breaks_the_wire) {
  worker_process w({"--mode", "fork"});
  w.send(ipc::message_type::tighten, 8, usr_only().dump());
  w.send(ipc::message_type::code, 9, "print('ran')");
  const auto exit = w.wait_exit(20s);
  BOOST_TEST(exit.exited);
  BOOST_TEST(exit.code == 3);
  BOOST_TEST(w.diagnostics().find("TIGHTEN for request 8") != std::string::npos);
}

// The harness narrows with its own copy of Landlock's tables (Python, in
// the zygote): the right names and bit positions, the rights a file rule
// may carry, and what each ABI version knows must be the C++ side's.
BOOST_AUTO_TEST_CASE(the_harness_landlock_tables_are_the_platforms) {
  const std::string dir = std::filesystem::path(harness()).parent_path().string();
  auto r = run_process({"/usr/bin/python3", "-I", "-c",
                        "import json, sys\n"
                        "sys.path.insert(0, " + json(dir).dump() + ")\n"
                        "import castellan_tighten as t\n"
                        "print(json.dumps({'fs': t.FS_RIGHTS, 'net': t.NET_RIGHTS,\n"
                        "  'scopes': t.SCOPES, 'file': t.FS_FILE_RIGHTS,\n"
                        "  'abi': [t._rights_of_abi(a) for a in range(12)]}))\n"});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
  const auto t = json::parse(r.out);
  std::vector<std::string> fs, net, scopes;
  for (unsigned bit = 0; bit < 64; ++bit) {
    for (auto& n : platform::landlock_fs_names(1ull << bit))
      fs.push_back(n);
    for (auto& n : platform::landlock_net_names(1ull << bit))
      net.push_back(n);
    for (auto& n : platform::landlock_scope_names(1ull << bit))
      scopes.push_back(n);
  }
  BOOST_TEST(t["fs"].get<std::vector<std::string>>() == fs, t["fs"].dump());
  BOOST_TEST(t["net"].get<std::vector<std::string>>() == net, t["net"].dump());
  BOOST_TEST(t["scopes"].get<std::vector<std::string>>() == scopes, t["scopes"].dump());
  BOOST_TEST(t["file"].get<uint64_t>() == platform::landlock_fs::file_rights);
  for (int abi = 0; abi < 12; ++abi) {
    const auto& row = t["abi"][static_cast<std::size_t>(abi)];
    BOOST_TEST(row[0].get<uint64_t>() == platform::landlock_fs_rights_of_abi(abi), "ABI " << abi);
    BOOST_TEST(row[1].get<uint64_t>() == platform::landlock_net_rights_of_abi(abi), "ABI " << abi);
    BOOST_TEST(row[2].get<uint64_t>() == platform::landlock_scopes_of_abi(abi), "ABI " << abi);
  }
}

BOOST_AUTO_TEST_SUITE_END()
