/// @file options.cpp
/// A small hand-written parser: the worker links no CLI library, throws
/// nothing, and accepts `--name value` and `--name=value`.

#include "worker/options.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <string_view>

namespace castellan::worker {

namespace {

outcome<int> parse_fd(std::string_view name, const std::string& text) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos)
    return logic_failure(std::string(name) + ": '" + text + "' is not a file descriptor number");
  errno = 0;
  const long value = std::strtol(text.c_str(), nullptr, 10);
  if (errno != 0 || value > INT_MAX)
    return logic_failure(std::string(name) + ": '" + text + "' is out of range");
  if (value < 3)
    return logic_failure(std::string(name) + ": fd " + text +
                         " is one of stdin/stdout/stderr; pass the wire on fds >= 3");
  return static_cast<int>(value);
}

} // namespace

const char* to_string(harness_mode mode) noexcept {
  switch (mode) {
    case harness_mode::oneshot:
      return "oneshot";
    case harness_mode::fork:
      return "fork";
    case harness_mode::session:
      return "session";
    case harness_mode::reuse:
      break;
  }
  return "reuse";
}

std::string usage() {
  return "usage: castellan-worker --segment-fd N --to-worker-fd N --to-supervisor-fd N\n"
         "                        --harness PATH [--python PATH] [--mode reuse|fork|oneshot|session]\n"
         "\n"
         "  --segment-fd N        inherited memfd holding both rings (docs/wire.md)\n"
         "  --to-worker-fd N      inherited eventfd the supervisor rings\n"
         "  --to-supervisor-fd N  inherited eventfd the worker rings\n"
         "  --harness PATH        castellan_harness.py\n"
         "  --python PATH         the interpreter (default /usr/bin/python3)\n"
         "  --mode MODE           reuse (default): serve until SHUTDOWN, fresh globals per\n"
         "                        request; fork: serve until SHUTDOWN, each request in a\n"
         "                        process forked from the warm harness; oneshot: one request;\n"
         "                        session: serve until SHUTDOWN, one __main__ and the\n"
         "                        environment and cwd kept from request to request\n"
         "  --sandbox-spec-fd N   inherited sealed memfd with the sandbox spec: become PID 1\n"
         "                        of the sandbox (build the root, then Landlock and seccomp\n"
         "                        for the harness); --harness is a path inside that root\n"
         "  --control-fd N        inherited AF_UNIX socket to the supervisor: the seccomp\n"
         "                        listener goes there, denial details come back\n"
         "  --status-fd N         inherited pipe to the supervisor: a sandbox layer that\n"
         "                        could not be applied is reported there (PID 1 only)\n";
}

outcome<options> parse_options(int argc, const char* const* argv) {
  options opts;
  bool have_segment = false;
  bool have_to_worker = false;
  bool have_to_supervisor = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      opts.help = true;
      return opts;
    }
    std::string value;
    bool inline_value = false;
    if (const auto eq = arg.find('='); arg.rfind("--", 0) == 0 && eq != std::string::npos) {
      value = arg.substr(eq + 1);
      arg.resize(eq);
      inline_value = true;
    }
    const bool known = arg == "--segment-fd" || arg == "--to-worker-fd" ||
                       arg == "--to-supervisor-fd" || arg == "--python" || arg == "--harness" ||
                       arg == "--mode" || arg == "--sandbox-spec-fd" || arg == "--control-fd" ||
                       arg == "--status-fd";
    if (!known)
      return logic_failure("unknown argument '" + std::string(argv[i]) + "'");
    if (!inline_value) {
      if (i + 1 >= argc)
        return logic_failure(arg + " needs a value");
      value = argv[++i];
    }
    if (arg == "--sandbox-spec-fd") {
      auto fd = parse_fd(arg, value);
      if (!fd)
        return fd.error();
      opts.sandbox_spec_fd = *fd;
    } else if (arg == "--control-fd") {
      auto fd = parse_fd(arg, value);
      if (!fd)
        return fd.error();
      opts.control_fd = *fd;
    } else if (arg == "--status-fd") {
      auto fd = parse_fd(arg, value);
      if (!fd)
        return fd.error();
      opts.status_fd = *fd;
    } else if (arg == "--segment-fd" || arg == "--to-worker-fd" || arg == "--to-supervisor-fd") {
      auto fd = parse_fd(arg, value);
      if (!fd)
        return fd.error();
      if (arg == "--segment-fd") {
        opts.segment_fd = *fd;
        have_segment = true;
      } else if (arg == "--to-worker-fd") {
        opts.to_worker_fd = *fd;
        have_to_worker = true;
      } else {
        opts.to_supervisor_fd = *fd;
        have_to_supervisor = true;
      }
    } else if (arg == "--python") {
      if (value.empty())
        return logic_failure("--python: empty path");
      opts.python = value;
    } else if (arg == "--harness") {
      if (value.empty())
        return logic_failure("--harness: empty path");
      opts.harness = value;
    } else { // --mode
      if (value == "reuse")
        opts.mode = harness_mode::reuse;
      else if (value == "fork")
        opts.mode = harness_mode::fork;
      else if (value == "oneshot")
        opts.mode = harness_mode::oneshot;
      else if (value == "session")
        opts.mode = harness_mode::session;
      else
        return logic_failure("--mode: '" + value +
                             "' is not one of reuse, fork, oneshot, session");
    }
  }
  if (!have_segment)
    return logic_failure("--segment-fd is required");
  if (!have_to_worker)
    return logic_failure("--to-worker-fd is required");
  if (!have_to_supervisor)
    return logic_failure("--to-supervisor-fd is required");
  if (opts.harness.empty())
    return logic_failure("--harness is required");
  if (opts.segment_fd == opts.to_worker_fd || opts.segment_fd == opts.to_supervisor_fd ||
      opts.to_worker_fd == opts.to_supervisor_fd)
    return logic_failure("--segment-fd, --to-worker-fd and --to-supervisor-fd must differ");
  if (opts.sandbox_spec_fd >= 0 &&
      (opts.sandbox_spec_fd == opts.segment_fd || opts.sandbox_spec_fd == opts.to_worker_fd ||
       opts.sandbox_spec_fd == opts.to_supervisor_fd))
    return logic_failure("--sandbox-spec-fd must differ from the wire fds");
  if (opts.control_fd >= 0 &&
      (opts.control_fd == opts.segment_fd || opts.control_fd == opts.to_worker_fd ||
       opts.control_fd == opts.to_supervisor_fd || opts.control_fd == opts.sandbox_spec_fd))
    return logic_failure("--control-fd must differ from the wire fds and the spec fd");
  if (opts.status_fd >= 0 &&
      (opts.status_fd == opts.segment_fd || opts.status_fd == opts.to_worker_fd ||
       opts.status_fd == opts.to_supervisor_fd || opts.status_fd == opts.sandbox_spec_fd ||
       opts.status_fd == opts.control_fd))
    return logic_failure("--status-fd must differ from the wire, spec and control fds");
  return opts;
}

} // namespace castellan::worker
