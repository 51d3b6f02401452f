/// @file warm_interpreter.cpp
/// The embedded interpreter of castellan-launcher (warm_interpreter.hpp).

// Python.h first: it sets feature macros the system headers must see.
#include <Python.h>

#include "worker/warm_interpreter.hpp"
#include "worker/process_title.hpp"

#include <libgen.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <utility>
#include <vector>

namespace castellan::worker {

namespace {

/// castellan_runtime.main, looked up once in the launcher.
PyObject* harness_main = nullptr;

/// A new reference's owner.
struct py_ref {
  PyObject* p;
  explicit py_ref(PyObject* o) noexcept : p(o) {}
  ~py_ref() { Py_XDECREF(p); }
  py_ref(const py_ref&) = delete;
  py_ref& operator=(const py_ref&) = delete;
  explicit operator bool() const noexcept { return p != nullptr; }
};

/// The pending Python exception as text (and cleared).
std::string python_error() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  std::string out = "unknown Python error";
  if (value != nullptr) {
    py_ref text(PyObject_Str(value));
    const char* utf8 = text ? PyUnicode_AsUTF8(text.p) : nullptr;
    if (utf8 != nullptr)
      out = std::string(Py_TYPE(value)->tp_name) + ": " + utf8;
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return out;
}

/// The interpreter this binary embeds must be the one workers would exec:
/// its standard library and extension modules are what the sandbox binds.
outcome<void> check_same_interpreter(const std::string& python) {
  char* real = ::realpath(python.c_str(), nullptr);
  if (real == nullptr)
    return errno_failure("launcher: --python " + python);
  std::string base = ::basename(real);
  ::free(real);
  const std::string embedded =
    "python" + std::to_string(PY_MAJOR_VERSION) + "." + std::to_string(PY_MINOR_VERSION);
  if (base != embedded)
    return logic_failure("launcher: --python " + python + " is " + base + ", but this launcher "
                         "embeds " + embedded + "; start the pool without warm_start or use " +
                         embedded);
  return {};
}

/// sys.path.insert(0, dir); import castellan_runtime; sys.path.remove(dir):
/// what castellan_harness.py does, so that user code never sees the
/// harness's directory on sys.path.
PyObject* import_runtime(const std::string& dir) {
  PyObject* path = PySys_GetObject("path"); // borrowed
  py_ref entry(PyUnicode_DecodeFSDefault(dir.c_str()));
  if (path == nullptr || !entry || PyList_Insert(path, 0, entry.p) != 0)
    return nullptr;
  PyObject* runtime = PyImport_ImportModule("castellan_runtime");
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb); // the import's error survives the removal
  py_ref removed(PyObject_CallMethod(path, "remove", "O", entry.p));
  PyErr_Clear();
  PyErr_Restore(type, value, tb);
  return runtime;
}

/// os.environ becomes the C environment this process was given (the
/// interpreter read its own copy when the launcher started).
bool adopt_c_environment() {
  std::vector<std::pair<std::string, std::string>> vars;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr && eq != *e)
      vars.emplace_back(std::string(*e, static_cast<std::size_t>(eq - *e)), std::string(eq + 1));
  }
  py_ref os(PyImport_ImportModule("os"));
  py_ref env(os ? PyObject_GetAttrString(os.p, "environ") : nullptr);
  if (!env)
    return false;
  py_ref cleared(PyObject_CallMethod(env.p, "clear", nullptr)); // unsetenv for each
  if (!cleared)
    return false;
  for (const auto& [k, v] : vars) {
    py_ref key(PyUnicode_DecodeFSDefault(k.c_str()));
    py_ref value(PyUnicode_DecodeFSDefault(v.c_str()));
    if (!key || !value || PyObject_SetItem(env.p, key.p, value.p) != 0) // putenv
      return false;
  }
  return true;
}

/// SIGINT as the interpreter's start-up installs it (the clone reset every
/// disposition): the harness replaces it with its own before READY.
bool restore_sigint() {
  py_ref sig(PyImport_ImportModule("_signal"));
  py_ref handler(sig ? PyObject_GetAttrString(sig.p, "default_int_handler") : nullptr);
  py_ref done(handler ? PyObject_CallMethod(sig.p, "signal", "iO", SIGINT, handler.p) : nullptr);
  return static_cast<bool>(done);
}

/// The exit code of a SystemExit, as the interpreter computes it (None: 0,
/// an int: itself, anything else: printed, 1).
int system_exit_code() {
  PyObject *type = nullptr, *value = nullptr, *tb = nullptr;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  int code = 0;
  py_ref arg(value != nullptr ? PyObject_GetAttrString(value, "code") : nullptr);
  if (arg && arg.p != Py_None) {
    if (PyLong_Check(arg.p)) {
      code = static_cast<int>(PyLong_AsLong(arg.p));
    } else {
      py_ref text(PyObject_Str(arg.p));
      const char* utf8 = text ? PyUnicode_AsUTF8(text.p) : nullptr;
      PySys_WriteStderr("%s\n", utf8 != nullptr ? utf8 : "?");
      code = 1;
    }
  }
  PyErr_Clear();
  Py_XDECREF(type);
  Py_XDECREF(value);
  Py_XDECREF(tb);
  return code;
}

} // namespace

outcome<void> start_warm_interpreter(const std::string& python, const std::string& harness) {
  if (auto same = check_same_interpreter(python); !same)
    return same;
  // python3 -I -S -B, as castellan-worker starts the harness.
  PyConfig config;
  PyConfig_InitPythonConfig(&config);
  config.isolated = 1;
  config.use_environment = 0;
  config.user_site_directory = 0;
  config.site_import = 0;
  config.write_bytecode = 0;
  config.parse_argv = 0;
  config.install_signal_handlers = 1;
  PyStatus status = PyConfig_SetBytesString(&config, &config.program_name, python.c_str());
  if (!PyStatus_Exception(status))
    status = Py_InitializeFromConfig(&config);
  PyConfig_Clear(&config);
  if (PyStatus_Exception(status))
    return logic_failure(std::string("launcher: the interpreter did not start: ") +
                         (status.err_msg != nullptr ? status.err_msg : "?"));

  std::string dir = harness;
  dir = dir.substr(0, dir.find_last_of('/') == std::string::npos ? 0 : dir.find_last_of('/'));
  py_ref runtime(import_runtime(dir.empty() ? "." : dir));
  if (!runtime)
    return logic_failure("launcher: import castellan_runtime from " + dir + ": " +
                         python_error());
  py_ref warmed(PyObject_CallMethod(runtime.p, "warm_up", nullptr));
  if (!warmed)
    return logic_failure("launcher: castellan_runtime.warm_up(): " + python_error());
  harness_main = PyObject_GetAttrString(runtime.p, "main");
  if (harness_main == nullptr)
    return logic_failure("launcher: castellan_runtime.main: " + python_error());
  return {};
}

void interpreter_before_fork() noexcept { PyOS_BeforeFork(); }

void interpreter_after_fork() noexcept { PyOS_AfterFork_Parent(); }

namespace {

/// Set when prepare_warm_harness could not restore what it must.
bool prepare_failed = false;

void prepare_warm_harness(const harness_command& cmd) {
  set_process_title({cmd.argv(), cmd.argv() + cmd.arg_count()});
  PyOS_AfterFork_Child();
  // As the interpreter's start-up sets them (`python3` ignores both).
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  prepare_failed = !restore_sigint();
}

int run_warm_harness(const harness_command& cmd) {
  if (harness_main == nullptr || prepare_failed || !adopt_c_environment()) {
    PyErr_Print();
    return 1;
  }
  // Every reference is released before the interpreter is finalised.
  const int code = [&cmd]() -> int {
    const auto args = cmd.harness_args();
    py_ref argv(PyList_New(0));
    py_ref sys_argv(PyList_New(0));
    py_ref script(PyUnicode_DecodeFSDefault(cmd.harness_path().c_str()));
    bool built = argv && sys_argv && script && PyList_Append(sys_argv.p, script.p) == 0;
    for (const auto& a : args) {
      py_ref s(PyUnicode_DecodeFSDefault(a.c_str()));
      built = built && s && PyList_Append(argv.p, s.p) == 0 &&
              PyList_Append(sys_argv.p, s.p) == 0;
    }
    if (!built || PySys_SetObject("argv", sys_argv.p) != 0) {
      PyErr_Print();
      return 1;
    }
    py_ref result(PyObject_CallOneArg(harness_main, argv.p));
    if (!result) {
      if (PyErr_ExceptionMatches(PyExc_SystemExit))
        return system_exit_code();
      PyErr_Print(); // the traceback, as an uncaught exception prints it
      return 1;
    }
    if (PyLong_Check(result.p))
      return static_cast<int>(PyLong_AsLong(result.p));
    return result.p == Py_None ? 0 : 1;
  }();
  // Finalising flushes sys.stdout/stderr and runs atexit, as an exiting
  // interpreter would (a failed flush is exit code 120 there too).
  if (Py_FinalizeEx() < 0 && code == 0)
    return 120;
  return code & 0xff;
}

} // namespace

const in_process_harness warm_harness{&prepare_warm_harness, &run_warm_harness};

} // namespace castellan::worker
