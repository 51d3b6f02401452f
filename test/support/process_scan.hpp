#pragma once

/// @file process_scan.hpp
/// Finds tasks by name across the whole machine: how a test proves that no
/// process or thread of a killed worker survived. The code under test names
/// its tasks with prctl(PR_SET_NAME) (inherited by forks and threads), and
/// the test looks for that name in every /proc/<pid>/task/<tid>/comm.

#include <sys/types.h>

#include <string>
#include <vector>

namespace castellan::test {

/// A name of at most 15 characters, unique to this test process and call.
std::string unique_task_name(const char* prefix = "ck");

/// Python that gives the calling process that name (put it first in the code).
std::string python_set_task_name(const std::string& name);

/// Thread ids (host pid namespace) whose comm is exactly `name`.
std::vector<pid_t> tasks_named(const std::string& name);

/// Waits (polling, at most `timeout_ms`) until no task has that name; the
/// tasks still there when it gives up. Killed tasks take a moment to exit;
/// the default bound is a safety net for a loaded machine, not a timing
/// assertion.
std::vector<pid_t> wait_until_no_task_named(const std::string& name, int timeout_ms = 30000);

/// Waits (polling /proc/<tid>/syscall, at most `timeout_ms`, a safety net)
/// until a task named `name` is blocked in system call `nr`: the code before
/// that call has run. True once one is seen there.
bool wait_until_task_in_syscall(const std::string& name, long nr, int timeout_ms = 30000);

/// For an isolated-mode exec whose process is named `name`: waits (at most
/// `timeout_ms`, a safety net) until what it wrote to its fd 1 is in the
/// ring. That fd is a pipe the harness (the zygote's parent) drains into the
/// ring from its poll loop; the output is there once the pipe is empty and
/// the harness is blocked in poll again (it forwards what it read before it
/// polls). Call it once the exec is past its writes (e.g. blocked in a
/// later call, see wait_until_task_in_syscall).
bool wait_until_harness_drained(const std::string& name, int timeout_ms = 30000);

} // namespace castellan::test
