#pragma once

/// @file process_title.hpp
/// What /proc/<pid>/cmdline and comm show for a launched worker's processes.
/// They are clones of the launcher, so without this they would show the
/// launcher's command line, host paths included, to the code inside. Each
/// names itself over the launcher's argv area instead, as an exec would
/// have named it: PID 1 as castellan-worker, the interpreter process as
/// `python3 -I -S -B <harness> …` (cut to the area's length).

#include <string>
#include <vector>

namespace castellan::worker {

/// The launcher, at the start of main: where its argv strings lie.
void remember_title_area(int argc, char** argv) noexcept;

/// In a clone: `args` (NUL-separated) over the area, the rest zeroed; the
/// thread name (comm) becomes the basename of args[0]. Nothing happens when
/// no area was remembered (castellan-worker itself was exec'd).
void set_process_title(const std::vector<std::string>& args) noexcept;

} // namespace castellan::worker
