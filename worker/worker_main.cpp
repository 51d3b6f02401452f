/// @file worker_main.cpp
/// castellan-worker's body: validates the wire it inherited, builds the
/// sandbox as its PID 1, starts the Python harness on the wire, forwards
/// signals, reaps, and exits with the harness's status.
///
/// Exit codes: the harness's (128 + signal if one ended it); 2 for a bad
/// command line or bad inherited fds; 127 if the harness could not be
/// started (fork or exec failed); 1 for other start-up failures; 3-10 for a
/// sandbox layer that could not be applied (sandbox_setup.hpp), with one
/// stderr line naming the layer, the step and the errno. The supervisor does
/// not read a layer from these exit codes: once the harness runs, the code
/// can exit with any status, or exec a program that does. A layer failure
/// is reported on the status pipe (--status-fd), which only PID 1 holds.

#include "worker/worker_main.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>

#include "platform/linux/capabilities.hpp"
#include "worker/harness_launch.hpp"
#include "worker/inherited_fds.hpp"
#include "worker/options.hpp"
#include "worker/reaper.hpp"
#include "worker/sandbox_setup.hpp"

namespace {

constexpr int exit_usage = 2;
constexpr int exit_exec_failed = 127;

/// The status pipe (options::status_fd), -1 when there is none.
int status_fd = -1;

/// One record on the status pipe: "<exit code> <what failed>\n", written
/// at once (a pipe write of at most PIPE_BUF bytes is never interleaved).
/// Only PID 1 writes here, and only about its own start-up or the
/// interpreter process's, reported to it before the harness ran.
void report_status(int code, const castellan::failure& f) {
  if (status_fd < 0)
    return;
  std::string line = std::to_string(code) + " " + f.describe();
  std::replace(line.begin(), line.end(), '\n', ' ');
  line.resize(std::min<std::size_t>(line.size(), 1024));
  line.push_back('\n');
  [[maybe_unused]] const ssize_t n = ::write(status_fd, line.data(), line.size());
}

/// PID 1 could not start the harness: one stderr line, one record on the
/// status pipe, and the exit code that says why.
int fail(int code, const castellan::failure& f) {
  std::fprintf(stderr, "castellan-worker: %s\n", f.describe().c_str());
  report_status(code, f);
  return code;
}

} // namespace

namespace castellan::worker {

namespace {

int sandbox_failed(const sandbox_failure& failed) {
  return fail(failed.exit_code,
              failed.why.wrap(std::string("sandbox: ") + sandbox_exit_layer(failed.exit_code)));
}

/// The harness did not start: the exit code that says why.
int harness_failed(const failure& f, int sandbox_exit) {
  if (sandbox_exit != 0) // the child printed the precise reason
    return fail(sandbox_exit, f);
  return fail(f.code != 0 ? exit_exec_failed : 1, f);
}

/// A launched worker (warm start): the interpreter process is forked first
/// and prepares its inherited interpreter while this process reads the spec
/// and builds the root; then it applies its own layers (early_harness).
int run_launched(const options& opts, const in_process_harness* in_process) {
  if (auto r = become_subreaper(); !r)
    return fail(1, r.error());
  auto previous_mask = block_worker_signals();
  if (!previous_mask)
    return fail(1, previous_mask.error());
  harness_command cmd{opts};
  cmd.set_in_process(in_process);
  auto early = early_harness::fork(cmd, *previous_mask, opts.sandbox_spec_fd);
  if (!early)
    return fail(exit_exec_failed, early.error());
  sandbox_failure failed;
  auto sandbox = sandbox_setup::read(opts.sandbox_spec_fd, failed);
  if (!sandbox)
    return sandbox_failed(failed); // `early` ends its child unreleased
  if (!sandbox->build(failed))
    return sandbox_failed(failed); // `early` ends its child unreleased
  if (auto r = check_paths(opts); !r)
    return fail(exit_usage, r.error());
  int sandbox_exit = 0;
  auto harness = early->release(sandbox->root(), &sandbox_exit);
  if (!harness)
    return harness_failed(harness.error(), sandbox_exit);
  return supervise_harness(*harness, sandbox->relay());
}

} // namespace

int run_worker(int argc, char** argv, const in_process_harness* in_process) {
  // CAP_DAC_OVERRIDE is among the setup capabilities for overlay mounts
  // only: not effective from here on (before anything is read or forked),
  // build_root raises it around each one (capabilities.hpp).
  if (int err = platform::set_effective_capabilities(platform::overlay_capability_mask(), false))
    return fail(exit_sandbox_root, failure{err, "lower CAP_DAC_OVERRIDE"});
  auto opts = parse_options(argc, argv);
  if (!opts) {
    std::fprintf(stderr, "castellan-worker: %s\n%s", opts.error().describe().c_str(),
                 usage().c_str());
    return exit_usage;
  }
  if (opts->help) {
    std::fputs(usage().c_str(), stdout);
    return 0;
  }
  // As PID 1 of a sandbox, --python and --harness are paths inside its
  // root: they are checked once it is built.
  const bool sandboxed = opts->sandbox_spec_fd >= 0;
  if (!sandboxed) {
    if (auto r = check_paths(*opts); !r)
      return fail(exit_usage, r.error());
  }
  if (auto r = check_status_fd(*opts); !r)
    return fail(exit_usage, r.error());
  status_fd = opts->status_fd;
  if (auto r = check_inherited_fds(*opts); !r)
    return fail(exit_usage, r.error());
  // A session and process group of the worker's own: the supervisor's group
  // holds every worker, and a call aimed at a process group (setpriority,
  // ioprio_set, kill) must not reach past this worker. The pool kills the
  // group whose id is castellan-worker's pid (worker_kill.hpp). Already a
  // group leader (started so by hand): nothing to do.
  if (::setsid() < 0 && ::getpgrp() != ::getpid())
    return fail(1, errno_failure("setsid"));
  if (in_process != nullptr) {
    if (!sandboxed)
      return fail(exit_usage, logic_failure("a launched worker needs --sandbox-spec-fd"));
    return run_launched(*opts, in_process);
  }
  std::optional<sandbox_setup> sandbox;
  if (sandboxed) {
    sandbox_failure failed;
    sandbox = sandbox_setup::enter(opts->sandbox_spec_fd, failed);
    if (!sandbox)
      return sandbox_failed(failed);
    if (auto r = check_paths(*opts); !r)
      return fail(exit_usage, r.error());
  }
  if (auto r = become_subreaper(); !r)
    return fail(1, r.error());
  auto previous_mask = block_worker_signals();
  if (!previous_mask)
    return fail(1, previous_mask.error());
  harness_command cmd{*opts};
  if (sandbox)
    cmd.set_sandbox(&*sandbox);
  int sandbox_exit = 0;
  auto harness = spawn_harness(cmd, *previous_mask, &sandbox_exit);
  if (!harness)
    return harness_failed(harness.error(), sandbox_exit);
  return supervise_harness(*harness, sandbox ? sandbox->relay() : nullptr);
}

} // namespace castellan::worker
