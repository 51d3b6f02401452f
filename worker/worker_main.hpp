#pragma once

/// @file worker_main.hpp
/// castellan-worker's body, shared by its own main() and by the launcher,
/// whose workers run it without an exec.

#include "worker/harness_launch.hpp"

namespace castellan::worker {

/// Parses the command line, builds the sandbox (as PID 1 when the command
/// line carries a sandbox spec), starts the harness and supervises it; the
/// result is the process's exit code (see the exit codes in worker_main.cpp).
/// `in_process` null: the harness is exec'd (python3 -I -S -B harness …);
/// otherwise (a launched worker) its process runs the harness in the
/// interpreter it inherited, in early_harness's order.
int run_worker(int argc, char** argv, const in_process_harness* in_process = nullptr);

} // namespace castellan::worker
