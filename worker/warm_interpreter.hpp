#pragma once

/// @file warm_interpreter.hpp
/// The launcher's embedded interpreter: started once the way the worker
/// would start `python3 -I -S -B castellan_harness.py`, with the harness and
/// everything a worker loads after READY already imported; each worker's
/// interpreter process then runs the harness in a fork of it instead of an
/// exec of Python.
///
/// What a fork shares that an exec would not: the address-space layout and
/// the str hash secret of the launcher (the same in every worker of the
/// pool), and the interpreter's initialised pages until a worker writes
/// them (charged to the launcher's cgroup, not the worker's). Everything
/// else a process inherits is put back as an exec would leave it: the
/// environment, fds, signal dispositions, the random module's state.

#include <string>

#include "ipc/outcome.hpp"
#include "worker/harness_launch.hpp"

namespace castellan::worker {

/// Initialises the interpreter (sys.executable = `python`, which must be the
/// interpreter this binary embeds) and imports the harness from the directory
/// of `harness` (a host path), then what a worker loads after READY.
outcome<void> start_warm_interpreter(const std::string& python, const std::string& harness);

/// Around every clone of the launcher (in the launcher): the interpreter's
/// own fork protocol (its locks, os.register_at_fork hooks).
void interpreter_before_fork() noexcept;
void interpreter_after_fork() noexcept;

/// The worker's interpreter process, as an in_process_harness:
///  - prepare, right after the fork: its name, the interpreter's after-fork
///    protocol (locks, os.register_at_fork hooks: `random` reseeds), the
///    signal dispositions the interpreter's start-up sets;
///  - run, once the sandbox is applied: the environment (os.environ from
///    the C environment), sys.argv, then castellan_runtime.main with the
///    command's arguments; the exit code is what `python3
///    castellan_harness.py` would end with.
extern const in_process_harness warm_harness;

} // namespace castellan::worker
