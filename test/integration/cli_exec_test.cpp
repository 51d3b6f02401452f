#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"
#include "support/skip.hpp"

using castellan::test::castellan_cli;
using castellan::test::run_process;

namespace {

castellan::test::process_result cli(std::vector<std::string> args, const std::string& input = {}) {
  args.insert(args.begin(), castellan_cli());
  return run_process(args, input);
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_exec)

BOOST_AUTO_TEST_CASE(prints_and_exits_zero) {
  auto r = cli({"exec", "print(6*7)"});
  BOOST_TEST(r.out == "42\n");
  BOOST_TEST(r.err == "");
  BOOST_TEST(r.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(an_exception_exits_1_with_the_traceback_on_stderr) {
  auto r = cli({"exec", "raise ValueError(\"x\")"});
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.err.find("Traceback (most recent call last)") != std::string::npos, r.err);
  BOOST_TEST(r.err.find("ValueError: x") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(json_shows_the_whole_result) {
  auto r = cli({"exec", "--json", "print('o'); raise ValueError(\"x\")"});
  BOOST_TEST(r.exit_code == 1);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["error_class"] == "exception");
  BOOST_TEST(j["exit_code"] == 1);
  BOOST_TEST(j["stdout"] == "o\n");
  BOOST_TEST(j["exception"]["type"] == "ValueError");
  BOOST_TEST(j["exception"]["message"] == "x");
  BOOST_TEST(j["events"].is_array());
  BOOST_TEST(j["timing"]["run_us"].get<uint64_t>() > 0u);
  for (const char* key : {"stderr", "stdout_truncated", "stderr_truncated", "usage"})
    BOOST_TEST(j.contains(key), key);
  // Isolated unless asked otherwise.
  BOOST_TEST(j["enforcement"]["mode"] == "isolated", j["enforcement"].dump());
  auto shared = cli({"exec", "--json", "--mode", "shared", "pass"});
  BOOST_TEST(nlohmann::json::parse(shared.out)["enforcement"]["mode"] == "shared", shared.out);
  auto old_name = cli({"exec", "--mode", "reuse", "pass"});
  BOOST_TEST(old_name.exit_code != 0);
  BOOST_TEST(old_name.err.find("--mode") != std::string::npos, old_name.err);
}

BOOST_AUTO_TEST_CASE(sys_exit_code_is_the_process_exit_code) {
  BOOST_TEST(cli({"exec", "import sys; sys.exit(3)"}).exit_code == 3);
  BOOST_TEST(cli({"exec", "raise SystemExit(0)"}).exit_code == 0);
}

BOOST_AUTO_TEST_CASE(code_from_stdin_and_from_a_file) {
  auto r = cli({"exec", "-"}, "print('from stdin')\n");
  BOOST_TEST(r.out == "from stdin\n");
  auto f = cli({"exec", "-f", castellan::test::source_dir() + "/test/integration/data/hello.py"});
  BOOST_TEST(f.out == "hello from a file\n");
  BOOST_TEST(f.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(env_workdir_and_stdin_reach_the_code_and_the_command) {
  auto code = cli({"exec", "--stdin", "-e", "A=1", "-e", "B=two words", "-w", "/usr",
                   "import os, sys; print(sys.stdin.read().strip(), os.environ['A'], "
                   "os.environ['B'], os.getcwd())"},
                  "piped in\n");
  BOOST_TEST(code.exit_code == 0, code.err);
  BOOST_TEST(code.out == "piped in 1 two words /usr\n");
  auto cmd = cli({"run", "--stdin", "-e", "X=y", "-w", "/usr/lib", "--", "/bin/sh", "-c",
                  "read line; echo \"<$line>\"; echo $X; pwd"},
                 "shout\n");
  BOOST_TEST(cmd.exit_code == 0, cmd.err);
  BOOST_TEST(cmd.out == "<shout>\ny\n/usr/lib\n");
  // Without --stdin the exec reads nothing, whatever the CLI's stdin holds.
  auto none = cli({"exec", "import sys; print(repr(sys.stdin.read()))"}, "not passed\n");
  BOOST_TEST(none.out == "''\n");
  auto bad_env = cli({"exec", "-e", "NOEQUALS", "print(1)"});
  BOOST_TEST(bad_env.exit_code == 2);
  BOOST_TEST(bad_env.err.find("env[0]: 'NOEQUALS' is not NAME=VALUE") != std::string::npos,
             bad_env.err);
  auto missing = cli({"exec", "-w", "/no/such", "print(1)"});
  BOOST_TEST(missing.exit_code == 126);
  BOOST_TEST(missing.err.find("cannot enter the working directory '/no/such'") !=
                 std::string::npos,
             missing.err);
  auto both = cli({"exec", "--stdin", "-"}, "print(1)\n");
  BOOST_TEST(both.exit_code == 2);
}

BOOST_AUTO_TEST_CASE(a_program_path_that_is_not_utf8_is_refused_before_a_pool_starts) {
  // A policy would have to name it, and policies are JSON: before, the
  // pool actor died on it.
  auto r = cli({"run", "--", "/bin/\xff"});
  BOOST_TEST(r.exit_code == 2);
  BOOST_TEST(r.err.find("the program's path is not UTF-8") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(timeout_is_124) {
  auto r = cli({"exec", "--timeout", "1s", "while True: pass"});
  BOOST_TEST(r.exit_code == 124);
  BOOST_TEST(r.err.find("timeout") != std::string::npos, r.err);
}

BOOST_AUTO_TEST_CASE(castellan_errors_exit_2_with_a_message) {
  auto bad_flag = cli({"exec", "--no-such-flag", "pass"});
  BOOST_TEST(bad_flag.exit_code == 2);
  auto no_code = cli({"exec"});
  BOOST_TEST(no_code.exit_code == 2);
  BOOST_TEST(no_code.err.find("no code given") != std::string::npos, no_code.err);
  auto bad_python = cli({"exec", "--python", "/nonexistent/python3", "pass"});
  BOOST_TEST(bad_python.exit_code == 2);
  BOOST_TEST(bad_python.err.find("/nonexistent/python3") != std::string::npos, bad_python.err);
  auto bad_timeout = cli({"exec", "--timeout", "soon", "pass"});
  BOOST_TEST(bad_timeout.exit_code == 2);
  BOOST_TEST(bad_timeout.err.find("'soon' is not a duration") != std::string::npos);
  auto missing_file = cli({"exec", "-f", "/nonexistent.py"});
  BOOST_TEST(missing_file.exit_code == 2);
  BOOST_TEST(missing_file.err.find("/nonexistent.py") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_denied_read_below_a_bound_directory_is_covered) {
  // The default policy plus one deny: Python's xml package, inside /usr,
  // which the sandbox binds read-only for the interpreter.
  std::ifstream in(castellan::test::source_dir() + "/policies/default.json");
  auto doc = nlohmann::json::parse(in);
  doc["fs"]["rules"].push_back(
    {{"action", "deny"}, {"path", "/usr/lib/python3*/xml"}, {"perms", {"read_file", "read_dir"}}});
  char path[] = "/tmp/castellan-deny-read-XXXXXX.json";
  const int fd = ::mkstemps(path, 5);
  BOOST_REQUIRE(fd >= 0);
  ::close(fd);
  std::ofstream(path) << doc.dump();
  const std::string code = R"PY(
import os, sys
xml = "/usr/lib/python3.%d/xml" % sys.version_info[1]
def attempt(f, denied=PermissionError):
    try:
        f()
        return "allowed"
    except denied:
        return "denied"
print(attempt(lambda: open(xml + "/__init__.py").read()),
      attempt(lambda: os.listdir(xml)),
      attempt(lambda: __import__("xml.dom"), ImportError),  # the finder cannot see it
      attempt(lambda: open(os.path.dirname(xml) + "/json/__init__.py").read()))
)PY";
  auto r = cli({"exec", "--json", "--policy", path, code});
  ::unlink(path);
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out + r.err);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["stdout"] == "denied denied denied allowed\n");
  bool reported = false;
  for (const auto& m : j["enforcement"]["root"]["mounted"])
    reported = reported || m.get<std::string>().find("/xml (masked)") != std::string::npos;
  BOOST_TEST(reported, j["enforcement"]["root"].dump());
}

BOOST_AUTO_TEST_CASE(json_lists_the_decided_system_calls) {
  const std::string policy =
    castellan::test::source_dir() + "/test/integration/data/mediated.json";
  auto r = cli({"exec", "--json", "--policy", policy,
                "import os\n"
                "os.makedirs('/tmp/denied', exist_ok=True)\n"
                "try:\n"
                "    open('/tmp/denied/x', 'w')\n"
                "except PermissionError as e:\n"
                "    print(e)\n"
                "os.makedirs('/tmp/warned', exist_ok=True)\n"
                "open('/tmp/warned/y', 'w').close()\n"
                "print('done')\n"});
  BOOST_TEST(r.exit_code == 0, r.err);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["stdout"].get<std::string>().find("policy 'mediated' (rule /fs/rules/10") !=
               std::string::npos,
             j["stdout"]);
  BOOST_REQUIRE(j["events"].size() == 2u);
  BOOST_TEST(j["events"][0]["kind"] == "syscall_denied");
  BOOST_TEST(j["events"][0]["target"] == "/tmp/denied/x");
  BOOST_TEST(j["events"][0]["rule"] == "/fs/rules/10");
  BOOST_TEST(j["events"][1]["kind"] == "policy_warning");
  BOOST_TEST(j["events"][1]["target"] == "/tmp/warned/y");
}

BOOST_AUTO_TEST_CASE(json_lists_decided_path_and_network_calls) {
  const std::string policy =
    castellan::test::source_dir() + "/test/integration/data/mediated.json";
  auto r = cli({"exec", "--json", "--policy", policy,
                "import os, socket\n"
                "os.makedirs('/tmp/keep', exist_ok=True)\n"
                "os.makedirs('/tmp/denied', exist_ok=True)\n"
                "open('/tmp/keep/f', 'w').close()\n"
                "open('/tmp/plain', 'w').close()\n"
                "for call in (lambda: os.unlink('/tmp/keep/f'),\n"
                "             lambda: os.rename('/tmp/plain', '/tmp/keep/f'),\n"
                "             lambda: os.mkdir('/tmp/denied/d'),\n"
                "             lambda: socket.socket().connect(('203.0.113.9', 443)),\n"
                "             lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
                ".sendto(b'x', ('127.0.0.1', 5353))):\n"
                "    try:\n"
                "        call()\n"
                "    except PermissionError as e:\n"
                "        print(e)\n"
                "os.rename('/tmp/plain', '/tmp/moved')\n"
                "print('done', os.path.exists('/tmp/keep/f'), os.path.exists('/tmp/moved'))\n"});
  BOOST_TEST(r.exit_code == 0, r.err);
  auto j = nlohmann::json::parse(r.out);
  const std::string out = j["stdout"].get<std::string>();
  for (const char* text :
       {"(rule /fs/rules/14: unlink /tmp/keep/f)", "(rule /fs/rules/14: rename /tmp/keep/f)",
        "(rule /fs/rules/13: mkdir /tmp/denied/d)",
        "(rule /net/rules/0: connect tcp 203.0.113.9:443)",
        "(rule /net/rules/1: sendto udp 127.0.0.1:5353)", "done True True"})
    BOOST_TEST(out.find(text) != std::string::npos, text << " not in " << out);
  BOOST_REQUIRE(j["events"].size() == 5u);
  const char* expected[][3] = {{"unlink", "/tmp/keep/f", "/fs/rules/14"},
                               {"rename", "/tmp/keep/f", "/fs/rules/14"},
                               {"mkdir", "/tmp/denied/d", "/fs/rules/13"},
                               {"connect", "tcp 203.0.113.9:443", "/net/rules/0"},
                               {"sendto", "udp 127.0.0.1:5353", "/net/rules/1"}};
  for (std::size_t i = 0; i < 5; ++i) {
    BOOST_TEST(j["events"][i]["kind"] == "syscall_denied");
    BOOST_TEST(j["events"][i]["syscall"] == expected[i][0]);
    BOOST_TEST(j["events"][i]["target"] == expected[i][1]);
    BOOST_TEST(j["events"][i]["rule"] == expected[i][2]);
  }
}

BOOST_AUTO_TEST_CASE(a_request_policy_is_narrowed_in_isolated_mode_or_gets_its_own_pool) {
  // Two host directories outside the default root; the pool's policy
  // grants reading the first.
  char tmpl[] = "/var/tmp/castellan-cli-reqpol-XXXXXX";
  const char* base = ::mkdtemp(tmpl);
  BOOST_REQUIRE(base != nullptr);
  const std::string dir = base;
  ::chmod(base, 0755);
  for (const char* name : {"a", "b"}) {
    const std::string sub = dir + "/" + name;
    ::mkdir(sub.c_str(), 0755);
    std::ofstream(sub + "/secret.txt") << "secret " << name;
    ::chmod((sub + "/secret.txt").c_str(), 0644);
  }
  auto write = [&](const std::string& name, const nlohmann::json& doc) {
    const std::string path = dir + "/" + name;
    std::ofstream(path) << doc.dump(2);
    return path;
  };
  auto grant = [&](std::vector<std::string> subs) {
    nlohmann::json rules = nlohmann::json::array();
    for (const auto& s : subs)
      rules.push_back(
          {{"action", "allow"}, {"path", dir + "/" + s}, {"perms", {"read_file", "read_dir"}}});
    return nlohmann::json{{"version", 1}, {"extends", {"default"}}, {"fs", {{"rules", rules}}}};
  };
  const std::string pool = write("pool.json", grant({"a"}));
  const std::string stricter = write("stricter.json", {{"version", 1}, {"extends", {"default"}}});
  const std::string looser = write("looser.json", grant({"a", "b"}));
  const std::string invalid = write("invalid.json", {{"version", 1}, {"limits", {{"pids", 0}}}});
  auto reading = [&](const std::string& sub) {
    return "try:\n    print(open('" + dir + "/" + sub +
           "/secret.txt').read())\nexcept OSError as e:\n    print('denied', e.errno)\n";
  };

  auto plain = cli({"exec", "--json", "--mode", "isolated", "--policy", pool, reading("a")});
  BOOST_REQUIRE_MESSAGE(plain.exit_code == 0, plain.out + plain.err);
  BOOST_TEST(nlohmann::json::parse(plain.out)["stdout"] == "secret a\n");

  auto narrowed = cli({"exec", "--json", "--mode", "isolated", "--policy", pool, "--request-policy",
                       stricter, reading("a")});
  BOOST_REQUIRE_MESSAGE(narrowed.exit_code == 0, narrowed.out + narrowed.err);
  auto j = nlohmann::json::parse(narrowed.out);
  BOOST_TEST(j["stdout"] == "denied 13\n");
  BOOST_TEST(j["enforcement"]["tightening"]["landlock"]["enforced"] == true);

  auto own = cli({"exec", "--json", "--mode", "isolated", "--policy", pool, "--request-policy", looser,
                  reading("b")});
  BOOST_REQUIRE_MESSAGE(own.exit_code == 0, own.out + own.err);
  auto k = nlohmann::json::parse(own.out);
  BOOST_TEST(k["stdout"] == "secret b\n");
  BOOST_TEST(!k["enforcement"].contains("tightening"));

  auto bad = cli({"exec", "--request-policy", invalid, "print(1)"});
  BOOST_TEST(bad.exit_code == 2);
  BOOST_TEST(bad.err.find("invalid request policy") != std::string::npos, bad.err);
  BOOST_TEST(bad.err.find("/limits/pids: 0") != std::string::npos, bad.err);

  // Valid, but above what the supervisor allows: refused by the supervisor,
  // and said as written (not as CAF renders an error, quoted and escaped).
  const std::string greedy =
      write("greedy.json", {{"version", 1}, {"limits", {{"pids", 60000}}}});
  auto refused = cli({"exec", "--request-policy", greedy, "print(1)"});
  BOOST_TEST(refused.exit_code != 0);
  BOOST_TEST(refused.err.find("/limits/pids") != std::string::npos, refused.err);
  BOOST_TEST(refused.err.find("(ceiling)") != std::string::npos, refused.err);
  BOOST_TEST(refused.err.find("error(") == std::string::npos, refused.err);
  BOOST_TEST(refused.err.find("\\\"") == std::string::npos, refused.err);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// A bind the policy makes writable but the host's owner and mode keep the
// sandbox's code from writing: `policy check` warns, `policy explain` says
// the host refuses, and the kernel does refuse; once the directory belongs
// to the sandbox's host uid, all three agree that it may write.
BOOST_AUTO_TEST_CASE(policy_check_and_explain_know_the_host_owner_of_a_writable_bind) {
  if (::geteuid() != 0) {
    castellan::test::skip("not root: the sandbox's host uid is ours, nothing to refuse");
    return;
  }
  char pattern[] = "/var/tmp/castellan-writable-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(pattern) != nullptr);
  const std::string dir = pattern;
  ::chmod(dir.c_str(), 0755);
  const std::string policy = dir + ".json";
  std::ofstream(policy) << R"({"version": 1, "extends": [")"
                        << castellan::test::source_dir() << R"(/policies/default.json"],)"
                        << R"( "fs": {"rules": [{"action": "allow", "path": ")" << dir
                        << R"(", "perms": ["read_dir", "read_file", "write_file", "make_reg"]}]}})";
  const std::string create = "open('" + dir + "/out.txt', 'w').write('x')";

  auto check = cli({"policy", "check", policy});
  BOOST_TEST(check.exit_code == 0, check.err);
  BOOST_TEST(check.out.find(": ok, 1 warning") != std::string::npos, check.out);
  BOOST_TEST(check.out.find("host uid 65534 may not create files in " + dir) != std::string::npos,
             check.out);
  auto explain = cli({"policy", "explain", policy, "--fs", "make_reg:" + dir + "/out.txt"});
  BOOST_TEST(explain.out.find("deny fs make_reg:" + dir + "/out.txt by sandbox: host uid 65534") ==
               0u,
             explain.out);
  auto refused = cli({"exec", "--policy", policy, create});
  BOOST_TEST(refused.exit_code == 1);
  BOOST_TEST(refused.err.find("PermissionError") != std::string::npos, refused.err);

  BOOST_REQUIRE(::chown(dir.c_str(), 65534, 65534) == 0);
  check = cli({"policy", "check", policy});
  BOOST_TEST(check.out.find("warning") == std::string::npos, check.out);
  explain = cli({"policy", "explain", policy, "--fs", "make_reg:" + dir + "/out.txt"});
  BOOST_TEST(explain.out.find("allow fs make_reg:" + dir + "/out.txt") == 0u, explain.out);
  auto written = cli({"exec", "--policy", policy, create});
  BOOST_TEST(written.exit_code == 0, written.err);
  struct stat st {};
  BOOST_TEST(::stat((dir + "/out.txt").c_str(), &st) == 0);
  BOOST_TEST(st.st_uid == 65534u);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  std::filesystem::remove(policy, ec);
}

// Through the egress relay a loopback destination is the host's (the proxy
// connects from the host); explain says so.
BOOST_AUTO_TEST_CASE(explain_says_the_relay_reaches_the_hosts_loopback) {
  const std::string policy = "/tmp/castellan-relay-loopback.json";
  std::ofstream(policy) << R"({"version": 1, "extends": [")" << castellan::test::source_dir()
                        << R"(/policies/net-egress.json"], "net": {"rules": [)"
                        << R"({"action": "allow", "proto": "tcp", "cidr": "127.0.0.2/32", "ports": "8000"}]}})";
  auto r = cli({"policy", "explain", policy, "--net", "relay:tcp:127.0.0.2:8000"});
  std::remove(policy.c_str());
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.rfind("allow net relay:tcp:127.0.0.2:8000", 0) == 0u, r.out);
  BOOST_TEST(r.out.find("(through the egress proxy: the host's loopback)") != std::string::npos,
             r.out);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_run)

BOOST_AUTO_TEST_CASE(runs_a_command) {
  auto r = cli({"run", "--", "/bin/echo", "hi"});
  BOOST_TEST(r.out == "hi\n");
  BOOST_TEST(r.exit_code == 0);
}

BOOST_AUTO_TEST_CASE(passes_the_command_exit_code_and_stderr) {
  auto r = cli({"run", "--", "/bin/sh", "-c", "echo oops >&2; exit 4"});
  BOOST_TEST(r.err == "oops\n");
  BOOST_TEST(r.exit_code == 4);
}

BOOST_AUTO_TEST_CASE(a_missing_program_is_127) {
  auto r = cli({"run", "--json", "--", "/nonexistent/program"});
  BOOST_TEST(r.exit_code == 127);
  auto j = nlohmann::json::parse(r.out);
  BOOST_TEST(j["exit_code"] == 127);
}

BOOST_AUTO_TEST_CASE(a_host_program_outside_the_sandbox_is_explained) {
  // A program this host has in a directory no policy binds: the sandbox's
  // answer (127, no such file) comes with what to change. Below /tmp, the
  // explanation says why an fs rule there would not help.
  for (const char* base : {"/var/tmp", "/tmp"}) {
    std::string dir = std::string(base) + "/castellan-hostprog-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(dir.data()) != nullptr);
    const std::string prog = dir + "/prog";
    { std::ofstream(prog) << "#!/bin/sh\necho from the host\n"; }
    BOOST_REQUIRE(::chmod(prog.c_str(), 0755) == 0);
    auto r = cli({"run", "--", prog});
    BOOST_TEST(r.exit_code == 127);
    BOOST_TEST(r.out == "");
    BOOST_TEST(r.err.find(prog + ": No such file or directory") != std::string::npos, r.err);
    BOOST_TEST(r.err.find(prog + " is on this host but not inside the sandbox") !=
                 std::string::npos,
               r.err);
    BOOST_TEST((r.err.find("inside the sandbox's default root") != std::string::npos) ==
                 (std::string(base) == "/tmp"),
               r.err);
    // The pool says it, so every client has it: here in the JSON result.
    { std::ofstream(prog) << "#!/bin/sh\n"; }
    auto j = nlohmann::json::parse(cli({"run", "--json", "--", prog}).out);
    ::unlink(prog.c_str());
    ::rmdir(dir.c_str());
    BOOST_TEST(j["detail"].get<std::string>().find(prog + " is on this host") !=
               std::string::npos);
  }
  // A program that exists nowhere, or that ran and exited 127 itself, gets
  // no such explanation.
  auto r = cli({"run", "--", "/nonexistent/program"});
  BOOST_TEST(r.exit_code == 127);
  BOOST_TEST(r.err.find("is on this host") == std::string::npos, r.err);
  r = cli({"run", "--", "/bin/sh", "-c", "exit 127"});
  BOOST_TEST(r.exit_code == 127);
  BOOST_TEST(r.err == "");
}

BOOST_AUTO_TEST_CASE(a_program_the_exec_rules_refuse_is_explained) {
  // default.json allows python3 and what `run` names; dash cannot start
  // `id` (Landlock: EACCES) and ends 126. The result's detail names the rule
  // and what it allows, and says it cannot name the file.
  auto r = cli({"run", "--json", "--", "/bin/sh", "-c", "id"});
  BOOST_TEST(r.exit_code == 126);
  auto j = nlohmann::json::parse(r.out);
  const std::string detail = j.value("detail", std::string());
  BOOST_TEST(detail.find("policy exec default deny (/defaults/exec)") != std::string::npos, detail);
  BOOST_TEST(detail.find("/usr/bin/python3") != std::string::npos, detail);
  BOOST_TEST(detail.find("names no file") != std::string::npos, detail);
  // A command that ends 126 without any refusal gets no such detail.
  auto own = nlohmann::json::parse(cli({"run", "--json", "--", "/bin/sh", "-c", "exit 126"}).out);
  BOOST_TEST(own["exit_code"] == 126);
  BOOST_TEST(own.value("detail", std::string()).find("exec default deny") == std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(embed_example)

BOOST_AUTO_TEST_CASE(ten_thousand_results_all_match_their_requests) {
  auto r = run_process({castellan::test::build_dir() + "/bin/example_embed"}, {}, 300);
  BOOST_TEST_MESSAGE(r.out);
  BOOST_TEST(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find("10000 results from 8 requesters, pool of 4: 0 mismatched") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(cli_observability)

BOOST_AUTO_TEST_CASE(audit_log_records_the_run) {
  const std::string log = "/tmp/castellan-it-audit-" + std::to_string(::getpid()) + ".jsonl";
  std::remove(log.c_str());
  auto r = cli({"exec", "--audit-log", log, "import sys; sys.exit(4)"});
  BOOST_TEST(r.exit_code == 4);
  std::ifstream in(log);
  std::vector<nlohmann::json> records;
  for (std::string line; std::getline(in, line);)
    records.push_back(nlohmann::json::parse(line));
  BOOST_REQUIRE_EQUAL(records.size(), 2u);
  BOOST_TEST(records[0]["kind"] == "exec_start");
  BOOST_TEST(records[0]["v"] == 1);
  BOOST_TEST(records[0]["code_size"] == 23); // strlen("import sys; sys.exit(4)")
  BOOST_TEST(records[1]["kind"] == "exec_end");
  BOOST_TEST(records[1]["exit_code"] == 4);
  BOOST_TEST(records[1]["exec_id"] == records[0]["exec_id"]);
  auto tail = cli({"audit", "tail", log});
  BOOST_TEST(tail.exit_code == 0);
  BOOST_TEST(tail.out.find("exec_end") != std::string::npos, tail.out);
  std::remove(log.c_str());
}

BOOST_AUTO_TEST_CASE(status_metrics_is_valid_exposition_with_real_figures) {
  auto r = cli({"status", "--metrics", "--pool-size", "2"});
  BOOST_TEST(r.exit_code == 0, r.err);
  BOOST_TEST(r.out.find("castellan_worker_spawns_total{pool=\"default\"} 2") != std::string::npos,
             r.out);
  BOOST_TEST(r.out.find("castellan_pool_size{pool=\"default\"} 2") != std::string::npos, r.out);
  auto check = run_process({"/usr/bin/promtool", "check", "metrics"}, r.out);
  BOOST_TEST(check.exit_code == 0, check.out << check.err);
}

BOOST_AUTO_TEST_SUITE_END()
