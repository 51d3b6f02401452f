/// @file main.cpp
/// castellan-worker: validates the wire it inherited, starts the Python
/// harness on it, forwards signals, reaps, and exits with the harness's
/// status. Later it also becomes PID 1 of the sandbox.
///
/// Exit codes: the harness's (128 + signal if one ended it); 2 for a bad
/// command line or bad inherited fds; 127 if the harness could not be
/// started (fork or exec failed); 1 for other start-up failures.

#include <cstdio>
#include <string>

#include "worker/harness_launch.hpp"
#include "worker/inherited_fds.hpp"
#include "worker/options.hpp"
#include "worker/reaper.hpp"

namespace {

constexpr int exit_usage = 2;
constexpr int exit_exec_failed = 127;

int fail(int code, const castellan::failure& f) {
  std::fprintf(stderr, "castellan-worker: %s\n", f.describe().c_str());
  return code;
}

} // namespace

int main(int argc, char** argv) {
  using namespace castellan::worker;
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
  if (auto r = check_paths(*opts); !r)
    return fail(exit_usage, r.error());
  if (auto r = check_inherited_fds(*opts); !r)
    return fail(exit_usage, r.error());
  if (auto r = become_subreaper(); !r)
    return fail(1, r.error());
  auto previous_mask = block_worker_signals();
  if (!previous_mask)
    return fail(1, previous_mask.error());
  const harness_command cmd{*opts};
  auto harness = spawn_harness(cmd, *previous_mask);
  if (!harness)
    return fail(harness.error().code != 0 ? exit_exec_failed : 1, harness.error());
  return supervise_harness(*harness);
}
