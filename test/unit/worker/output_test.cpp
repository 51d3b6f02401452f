/// @file output_test.cpp
/// stdout/stderr capture: sizes, order, fd-level writes, hostile stream
/// replacement, forks, small rings.

#include <boost/test/unit_test.hpp>

#include <cstdio>

#include "worker_process.hpp"

using namespace castellan;
using namespace castellan::test;
using nlohmann::json;

BOOST_AUTO_TEST_SUITE(worker_output)

BOOST_AUTO_TEST_CASE(twenty_megabytes_of_lines_in_order) {
  worker_process w;
  auto r = w.run_code("import sys\n"
                      "for i in range(2_000_000):\n"
                      "    sys.stdout.write('%09d\\n' % i)\n");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 0);
  BOOST_REQUIRE(r.out.size() == 20'000'000u);
  std::string expected;
  expected.reserve(20'000'000);
  char line[16];
  for (int i = 0; i < 2'000'000; ++i) {
    std::snprintf(line, sizeof line, "%09d\n", i);
    expected += line;
  }
  BOOST_TEST((r.out == expected));
}

BOOST_AUTO_TEST_CASE(one_twenty_mib_write) {
  worker_process w;
  auto r =
      w.run_code("import sys\nsys.stdout.write('ab' * (10 << 20))\nprint('!', file=sys.stderr)");
  require_complete(r);
  BOOST_REQUIRE(r.out.size() == 20u << 20);
  bool pattern_ok = true;
  for (std::size_t i = 0; i < r.out.size() && pattern_ok; ++i)
    pattern_ok = r.out[i] == (i % 2 == 0 ? 'a' : 'b');
  BOOST_TEST(pattern_ok);
  BOOST_TEST(r.err == "!\n");
}

BOOST_AUTO_TEST_CASE(stderr_and_stdout_separate) {
  worker_process w;
  auto r = w.run_code("import sys\nprint('o1')\nprint('e1', file=sys.stderr)\nprint('o2')");
  require_complete(r);
  BOOST_TEST(r.out == "o1\no2\n");
  BOOST_TEST(r.err == "e1\n");
}

BOOST_AUTO_TEST_CASE(unicode_and_surrogates) {
  worker_process w;
  auto r =
      w.run_code("print('h\\u00e9llo \\u2603')\nimport sys\nprint('\\udcff', file=sys.stderr)");
  require_complete(r);
  BOOST_TEST(r.out == "h\xc3\xa9llo \xe2\x98\x83\n");
  BOOST_TEST(r.err == "\\udcff\n");
}

BOOST_AUTO_TEST_CASE(fd_level_writes_are_captured) {
  worker_process w;
  auto r = w.run_code("import os\nos.write(1, b\"raw\")\nos.write(2, b\"rawerr\")");
  require_complete(r);
  BOOST_TEST(r.out == "raw");
  BOOST_TEST(r.err == "rawerr");
  // Five megabytes straight to fd 1: more than any pipe buffer.
  r = w.run_code("import os\nfor i in range(500):\n    os.write(1, b'y' * 10000)");
  require_complete(r);
  BOOST_TEST(r.out.size() == 5'000'000u);
  BOOST_TEST(r.out.find_first_not_of('y') == std::string::npos);
}

BOOST_AUTO_TEST_CASE(subprocess_inherits_stdout) {
  worker_process w;
  auto r = w.run_code("import subprocess\n"
                      "subprocess.run(['/bin/echo', 'sub'])\n"
                      "subprocess.run(['/bin/sh', '-c', 'echo shell-err >&2'])\n"
                      "import os\nos.system('echo from-system')");
  require_complete(r);
  BOOST_TEST(r.out == "sub\nfrom-system\n");
  BOOST_TEST(r.err == "shell-err\n");
}

BOOST_AUTO_TEST_CASE(closed_stdout_is_replaced_next_time) {
  worker_process w;
  auto r = w.run_code("import sys\nprint('last words')\nsys.stdout.close()\nsys.stderr.close()");
  require_complete(r);
  BOOST_TEST(r.out == "last words\n");
  BOOST_TEST(r.result["exit_code"] == 0);
  r = w.run_code("import sys\nsys.stdout.close()\nprint('x')");
  require_complete(r);
  BOOST_TEST(r.result["exception"]["type"] == "ValueError");
  r = w.run_code("print('still here')");
  require_complete(r);
  BOOST_TEST(r.out == "still here\n");
}

BOOST_AUTO_TEST_CASE(replaced_stdout) {
  worker_process w;
  auto r = w.run_code("import sys, io\nsys.stdout = io.StringIO()\nprint('lost')");
  require_complete(r);
  BOOST_TEST(r.out == "");
  r = w.run_code("import sys\nsys.stdout = None\nsys.stderr = 42\nprint('nowhere')");
  require_complete(r);
  r = w.run_code("print('back')");
  BOOST_TEST(r.out == "back\n");
}

BOOST_AUTO_TEST_CASE(closed_fd_1_is_restored) {
  worker_process w;
  auto r = w.run_code("import os\nos.close(1)\nos.close(2)");
  require_complete(r);
  r = w.run_code("import os\nos.write(1, b'fd1 ok')");
  require_complete(r);
  BOOST_TEST(r.out == "fd1 ok");
}

BOOST_AUTO_TEST_CASE(forked_child_output_and_exit) {
  worker_process w;
  // The child writes through fd 1 (the wire is the parent's) and, when it
  // finishes the code, exits instead of serving a second harness loop.
  auto r = w.run_code("import os\n"
                      "pid = os.fork()\n"
                      "if pid == 0:\n"
                      "    print('in child')\n"
                      "else:\n"
                      "    os.waitpid(pid, 0)\n"
                      "    print('in parent')\n");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 0);
  BOOST_TEST(r.out.size() == std::string("in child\nin parent\n").size());
  BOOST_TEST(contains(r.out, "in child\n"));
  BOOST_TEST(contains(r.out, "in parent\n"));
  r = w.run_code("print('one harness')");
  require_complete(r);
  BOOST_TEST(r.out == "one harness\n");
  BOOST_TEST(!w.next_frame(std::chrono::milliseconds(300)).has_value());
}

BOOST_AUTO_TEST_CASE(small_ring) {
  // A 4 KiB ring: output frames are cut below 64 KiB, and a RESULT with a
  // huge exception is shortened to fit.
  worker_process w({}, 4096);
  auto r = w.run_code("print('z' * 100000)");
  require_complete(r);
  BOOST_TEST(r.out == std::string(100000, 'z') + "\n");
  r = w.run_code("raise ValueError('m' * 100000)");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "ValueError");
  const std::string message = r.result["exception"]["message"];
  BOOST_TEST(message.size() < 4096u);
  BOOST_TEST(contains(message, "\xe2\x80\xa6[truncated]"));
}

BOOST_AUTO_TEST_SUITE_END()
