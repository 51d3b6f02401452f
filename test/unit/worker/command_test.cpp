/// @file command_test.cpp
/// COMMAND requests: argv without a shell, streamed output, exit statuses.

#include <boost/test/unit_test.hpp>

#include "worker_process.hpp"

using namespace castellan;
using namespace castellan::test;
using nlohmann::json;

namespace {

/// argv as the wire carries it: each argument followed by a NUL.
std::string argv_payload(std::initializer_list<std::string> args) {
  std::string out;
  for (const auto& a : args) {
    out += a;
    out.push_back('\0');
  }
  return out;
}

exec_output run_command(worker_process& w, uint32_t id, std::initializer_list<std::string> args) {
  auto r = w.run(ipc::message_type::command, id, argv_payload(args));
  BOOST_REQUIRE_MESSAGE(r.complete, r.problem);
  return r;
}

} // namespace

BOOST_AUTO_TEST_SUITE(worker_command)

BOOST_AUTO_TEST_CASE(echo_hi) {
  worker_process w;
  auto r = run_command(w, 11, {"/bin/echo", "hi"});
  BOOST_TEST(r.out == "hi\n");
  BOOST_TEST(r.err == "");
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 0, "exception": null})"));
}

BOOST_AUTO_TEST_CASE(false_exits_1) {
  worker_process w;
  auto r = run_command(w, 12, {"/bin/false"});
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.result["exit_code"] == 1);
}

BOOST_AUTO_TEST_CASE(missing_program_is_127) {
  // The harness's own exec failed: the RESULT says so in exec_error
  // (docs/wire.md), in both ways it starts a program.
  for (const char* mode : {"reuse", "fork"}) {
    BOOST_TEST_CONTEXT(mode) {
      worker_process w({"--mode", mode});
      auto r = run_command(w, 13, {"/nonexistent/program", "arg"});
      BOOST_TEST(r.out == "");
      BOOST_TEST(r.err == "castellan: /nonexistent/program: No such file or directory\n");
      BOOST_TEST(r.result == json::parse(R"({"exit_code": 127, "exception": null,
        "exec_error": {"program": "/nonexistent/program", "errno": 2}})"));
      r = run_command(w, 14, {"no-such-program-anywhere"});
      BOOST_TEST(r.result["exit_code"] == 127);
      BOOST_TEST(r.result["exec_error"] ==
                 json::parse(R"({"program": "no-such-program-anywhere", "errno": 2})"));
      // Not executable.
      r = run_command(w, 15, {"/etc/passwd"});
      BOOST_TEST(r.result["exit_code"] == 126);
      BOOST_TEST(r.err == "castellan: /etc/passwd: Permission denied\n");
      BOOST_TEST(r.result["exec_error"] ==
                 json::parse(R"({"program": "/etc/passwd", "errno": 13})"));
      // A program that started and says the same words: no exec_error.
      r = run_command(
          w, 16,
          {"/bin/sh", "-c", "echo 'castellan: /etc/passwd: Permission denied' >&2; exit 126"});
      BOOST_TEST(r.err == "castellan: /etc/passwd: Permission denied\n");
      BOOST_TEST(r.result == json::parse(R"({"exit_code": 126, "exception": null})"));
    }
  }
}

BOOST_AUTO_TEST_CASE(arguments_are_not_split_by_a_shell) {
  worker_process w;
  auto r = run_command(w, 16, {"/usr/bin/printf", "%s|", "a b", "$HOME", "", "c;d"});
  BOOST_TEST(r.out == "a b|$HOME||c;d|");
  r = run_command(w, 17, {"echo", "found on PATH"});
  BOOST_TEST(r.out == "found on PATH\n");
}

BOOST_AUTO_TEST_CASE(stdout_stderr_and_status) {
  worker_process w;
  auto r = run_command(w, 18, {"/bin/sh", "-c", "echo out; echo err >&2; exit 7"});
  BOOST_TEST(r.out == "out\n");
  BOOST_TEST(r.err == "err\n");
  BOOST_TEST(r.result["exit_code"] == 7);
}

BOOST_AUTO_TEST_CASE(killed_by_a_signal) {
  worker_process w;
  auto r = run_command(w, 19, {"/bin/sh", "-c", "kill -TERM $$"});
  BOOST_TEST(r.result["exit_code"] == 143);
  r = run_command(w, 20, {"/bin/sh", "-c", "kill -KILL $$"});
  BOOST_TEST(r.result["exit_code"] == 137);
}

BOOST_AUTO_TEST_CASE(large_output) {
  worker_process w;
  auto r = run_command(w, 21, {"/usr/bin/head", "-c", "5000000", "/dev/zero"});
  BOOST_TEST(r.out.size() == 5'000'000u);
  BOOST_TEST(r.out.find_first_not_of('\0') == std::string::npos);
  BOOST_TEST(r.result["exit_code"] == 0);
}

BOOST_AUTO_TEST_CASE(background_grandchild_does_not_hold_the_result) {
  worker_process w;
  const auto start = std::chrono::steady_clock::now();
  auto r = run_command(w, 22, {"/bin/sh", "-c", "echo started; sleep 5 & exit 0"});
  const auto took = std::chrono::steady_clock::now() - start;
  BOOST_TEST(r.out == "started\n");
  BOOST_TEST(r.result["exit_code"] == 0);
  BOOST_TEST(std::chrono::duration_cast<std::chrono::milliseconds>(took).count() < 3000);
}

BOOST_AUTO_TEST_CASE(commands_and_code_interleave) {
  worker_process w;
  auto r = run_command(w, 23, {"/bin/echo", "one"});
  BOOST_TEST(r.out == "one\n");
  auto c = w.run_code("print('two')");
  BOOST_TEST(c.out == "two\n");
  r = run_command(w, 24, {"/bin/echo", "three"});
  BOOST_TEST(r.out == "three\n");
}

BOOST_AUTO_TEST_SUITE_END()
