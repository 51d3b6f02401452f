/// @file code_test.cpp
/// CODE requests: results, exceptions, exits, isolation between requests.

#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <string>

#include "support/build_paths.hpp"
#include "support/run_process.hpp"
#include "worker_process.hpp"

using namespace castellan;
using namespace castellan::test;
using nlohmann::json;

BOOST_AUTO_TEST_SUITE(worker_code)

BOOST_AUTO_TEST_CASE(print_6_times_7) {
  worker_process w;
  auto r = w.run_code("print(6*7)");
  require_complete(r);
  BOOST_TEST(r.out == "42\n");
  BOOST_TEST(r.err == "");
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 0, "exception": null})"));
}

BOOST_AUTO_TEST_CASE(value_error) {
  worker_process w;
  auto r = w.run_code("raise ValueError(\"x\")");
  require_complete(r);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.result["exit_code"] == 1);
  const auto& e = r.result["exception"];
  BOOST_REQUIRE(e.is_object());
  BOOST_TEST(e["type"] == "ValueError");
  BOOST_TEST(e["message"] == "x");
  const std::string tb = e["traceback"];
  BOOST_TEST(tb == "Traceback (most recent call last):\n"
                   "  File \"<exec>\", line 1, in <module>\n"
                   "    raise ValueError(\"x\")\n"
                   "ValueError: x\n");
  BOOST_TEST(!contains(tb, "castellan_"));
}

BOOST_AUTO_TEST_CASE(every_module_of_the_harness_is_hidden_from_tracebacks) {
  // HARNESS_FILES names the harness's modules one by one: a module added to
  // worker/python/ must be among them, or its frames would show in user
  // tracebacks and a KeyboardInterrupt could land in it. Two are not: the
  // entry point (covered as __main__ when it runs) and castellan_clean (run
  // by the zygote between execs, never below user code).
  const std::string dir = std::filesystem::path(harness()).parent_path().string();
  auto r = run_process({"/usr/bin/python3", "-I", "-S", "-c",
                        "import glob, os, sys\n"
                        "sys.path.insert(0, sys.argv[1])\n"
                        "import castellan_plumbing as o\n"
                        "files = sorted(glob.glob(os.path.join(sys.argv[1], 'castellan_*.py')))\n"
                        "shown = [f for f in files if f not in o.HARNESS_FILES and\n"
                        "         os.path.basename(f) not in ('castellan_harness.py',\n"
                        "                                     'castellan_clean.py')]\n"
                        "print(len(files), shown)\n",
                        dir});
  BOOST_REQUIRE_MESSAGE(r.exit_code == 0, r.out << r.err);
  BOOST_TEST(r.out.find(" []\n") != std::string::npos, r.out);
  BOOST_TEST(std::stoi(r.out) >= 11, r.out);
}

BOOST_AUTO_TEST_CASE(traceback_through_functions_and_chains) {
  worker_process w;
  auto r = w.run_code("def inner():\n"
                      "    raise KeyError('k')\n"
                      "def outer():\n"
                      "    try:\n"
                      "        inner()\n"
                      "    except KeyError as e:\n"
                      "        raise RuntimeError('wrapped') from e\n"
                      "outer()\n");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  const auto& e = r.result["exception"];
  BOOST_TEST(e["type"] == "RuntimeError");
  BOOST_TEST(e["message"] == "wrapped");
  const std::string tb = e["traceback"];
  BOOST_TEST(contains(tb, "  File \"<exec>\", line 2, in inner\n    raise KeyError('k')\n"));
  BOOST_TEST(contains(tb, "KeyError: 'k'\n\nThe above exception was the direct cause"));
  BOOST_TEST(contains(tb, "  File \"<exec>\", line 8, in <module>\n    outer()\n"));
  BOOST_TEST(!contains(tb, "castellan_"));
  BOOST_TEST(!contains(tb, "share/castellan"));
}

BOOST_AUTO_TEST_CASE(library_frames_are_kept) {
  worker_process w;
  auto r = w.run_code("import json\njson.loads('{')");
  require_complete(r);
  const auto& e = r.result["exception"];
  BOOST_TEST(e["type"] == "json.decoder.JSONDecodeError");
  const std::string tb = e["traceback"];
  BOOST_TEST(contains(tb, "File \"<exec>\", line 2, in <module>"));
  BOOST_TEST(contains(tb, "json/decoder.py"));
  BOOST_TEST(!contains(tb, "castellan_"));
}

BOOST_AUTO_TEST_CASE(syntax_error) {
  worker_process w;
  auto r = w.run_code("def f(:\n  pass\n");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  const auto& e = r.result["exception"];
  BOOST_TEST(e["type"] == "SyntaxError");
  const std::string tb = e["traceback"];
  BOOST_TEST(tb.rfind("  File \"<exec>\", line 1\n    def f(:\n", 0) == 0);
  BOOST_TEST(contains(tb, "SyntaxError: invalid syntax\n"));
  BOOST_TEST(!contains(tb, "castellan_"));
}

BOOST_AUTO_TEST_CASE(sys_exit_codes) {
  worker_process w;
  auto r = w.run_code("import sys\nsys.exit(3)");
  require_complete(r);
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 3, "exception": null})"));
  r = w.run_code("import sys\nprint('before')\nsys.exit()\nprint('after')");
  require_complete(r);
  BOOST_TEST(r.out == "before\n");
  BOOST_TEST(r.result["exit_code"] == 0);
  r = w.run_code("raise SystemExit(None)");
  BOOST_TEST(r.result["exit_code"] == 0);
  r = w.run_code("raise SystemExit(True)");
  BOOST_TEST(r.result["exit_code"] == 1);
  // exit() and quit() exist although the harness runs without site.main().
  r = w.run_code("exit(5)");
  require_complete(r);
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 5, "exception": null})"));
  r = w.run_code("quit(6)");
  BOOST_TEST(r.result["exit_code"] == 6);
}

BOOST_AUTO_TEST_CASE(system_exit_with_a_message) {
  worker_process w;
  auto r = w.run_code("raise SystemExit(\"bye\")");
  require_complete(r);
  BOOST_TEST(r.out == "");
  BOOST_TEST(r.err == "bye\n");
  BOOST_TEST(r.result == json::parse(R"({"exit_code": 1, "exception": null})"));
  r = w.run_code("import sys\nsys.exit([1, 2])");
  BOOST_TEST(r.err == "[1, 2]\n");
  BOOST_TEST(r.result["exit_code"] == 1);
}

BOOST_AUTO_TEST_CASE(keyboard_interrupt_and_base_exceptions) {
  worker_process w;
  auto r = w.run_code("raise KeyboardInterrupt");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "KeyboardInterrupt");
  BOOST_TEST(r.result["exception"]["message"] == "");
  r = w.run_code("class Custom(BaseException):\n    pass\nraise Custom('m')");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "Custom");
  BOOST_TEST(r.result["exception"]["message"] == "m");
  r = w.run_code("raise GeneratorExit");
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "GeneratorExit");
  // The harness is still serving.
  r = w.run_code("print('alive')");
  BOOST_TEST(r.out == "alive\n");
}

BOOST_AUTO_TEST_CASE(hostile_exception_str) {
  worker_process w;
  auto r = w.run_code("class E(Exception):\n"
                      "    def __str__(self):\n"
                      "        raise RuntimeError('no')\n"
                      "raise E()");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "E");
  BOOST_TEST(r.result["exception"]["message"] == "<exception str() failed>");
}

BOOST_AUTO_TEST_CASE(globals_do_not_leak) {
  worker_process w;
  auto r = w.run_code("x = 1\nprint(__name__)");
  require_complete(r);
  BOOST_TEST(r.out == "__main__\n");
  BOOST_TEST(r.result["exit_code"] == 0);
  r = w.run_code("print(x)");
  require_complete(r);
  BOOST_TEST(r.result["exit_code"] == 1);
  BOOST_TEST(r.result["exception"]["type"] == "NameError");
  BOOST_TEST(r.result["exception"]["message"] == "name 'x' is not defined");
  r = w.run_code("print(sorted(k for k in globals() if not k.startswith('__')))");
  BOOST_TEST(r.out == "[]\n");
}

BOOST_AUTO_TEST_CASE(main_module_is_the_users) {
  worker_process w;
  auto r = w.run_code(
      "import __main__, pickle\n"
      "class P:\n"
      "    pass\n"
      "print(__main__.__dict__ is globals(), type(pickle.loads(pickle.dumps(P()))).__name__)");
  require_complete(r);
  BOOST_TEST(r.out == "True P\n");
}

BOOST_AUTO_TEST_CASE(stdin_is_empty) {
  worker_process w;
  auto r = w.run_code("input()");
  require_complete(r);
  BOOST_TEST(r.result["exception"]["type"] == "EOFError");
  r = w.run_code("import os\nprint(os.read(0, 10))");
  BOOST_TEST(r.out == "b''\n");
}

BOOST_AUTO_TEST_CASE(environment_restored_between_requests) {
  worker_process w;
  auto r = w.run_code("import os, sys\n"
                      "os.environ['CASTELLAN_TEST_LEAK'] = '1'\n"
                      "sys.path.insert(0, '/leak')\n"
                      "os.chdir('/')\n"
                      "sys.setrecursionlimit(50)");
  require_complete(r);
  r = w.run_code("import os, sys\n"
                 "print('CASTELLAN_TEST_LEAK' in os.environ, '/leak' in sys.path, "
                 "sys.getrecursionlimit())");
  BOOST_TEST(r.out == "False False 1000\n");
}

BOOST_AUTO_TEST_CASE(site_packages_on_the_path) {
  worker_process w;
  auto r = w.run_code("import sys\nprint(any(p.endswith('dist-packages') for p in sys.path))");
  require_complete(r);
  BOOST_TEST(r.out == "True\n");
}

BOOST_AUTO_TEST_SUITE_END()
