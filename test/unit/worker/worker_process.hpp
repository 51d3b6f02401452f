#pragma once

/// @file worker_process.hpp
/// Test support: plays the supervisor for one real castellan-worker. Creates
/// the segment and both doorbells, fork/execs build/bin/castellan-worker
/// with them, and reads and writes frames with timeouts everywhere.

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <nlohmann/json.hpp>

#include "ipc/doorbell.hpp"
#include "ipc/ring.hpp"
#include "ipc/segment.hpp"

namespace castellan::test {

using namespace std::chrono_literals;

/// $CASTELLAN_BUILD_DIR/bin/castellan-worker (or beside test-bin/ when the
/// variable is not set).
std::string worker_binary();
/// $CASTELLAN_BUILD_DIR/share/castellan/python/castellan_harness.py
std::string harness_script();

/// What one CODE/COMMAND produced.
struct exec_output {
  std::string out;
  std::string err;
  nlohmann::json result; ///< the RESULT payload
  bool complete = false; ///< a RESULT arrived before the timeout
  std::string problem;   ///< what went wrong otherwise
};

/// Fails the test unless a RESULT arrived, saying what went wrong instead.
inline void require_complete(const exec_output& r) {
  BOOST_REQUIRE_MESSAGE(r.complete, r.problem);
}

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

/// The exit of a process, as a shell reports it (128 + signal).
struct exit_info {
  bool exited = false;
  int code = -1;
};

/// Waits up to `timeout` for `pid` to end; reaps it.
exit_info wait_for_exit(pid_t pid, std::chrono::milliseconds timeout);

/// Runs castellan-worker with `args` (argv[0] is added), `keep_fds`
/// inherited; returns its exit code and stderr. For the command-line tests.
struct cli_run {
  exit_info exit;
  std::string err;
};
cli_run run_worker_cli(const std::vector<std::string>& args, const std::vector<int>& keep_fds,
                       std::chrono::milliseconds timeout = 20s);

class worker_process {
public:
  /// Starts the worker (extra arguments appended) and waits for READY.
  explicit worker_process(std::vector<std::string> extra_args = {}, uint32_t capacity = 1u << 20);
  ~worker_process();
  worker_process(const worker_process&) = delete;
  worker_process& operator=(const worker_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  /// The READY payload.
  const nlohmann::json& ready() const noexcept { return ready_; }
  /// The harness's pid, from READY.
  pid_t harness_pid() const { return ready_.at("pid").get<pid_t>(); }

  /// Writes one frame to the worker and rings its doorbell.
  void send(ipc::message_type type, uint32_t request_id, std::string_view payload);
  /// Writes raw bytes into the to_worker ring and publishes them (for
  /// malformed-frame tests).
  void send_raw(std::string_view bytes);

  /// The next frame from the worker, or nothing after `timeout` or when the
  /// worker has exited and sent nothing more.
  std::optional<ipc::frame> next_frame(std::chrono::milliseconds timeout);

  /// Sends CODE (or COMMAND) and collects STDOUT/STDERR until RESULT.
  exec_output run(ipc::message_type type, uint32_t request_id, std::string_view payload,
                  std::chrono::milliseconds timeout = 60s);
  exec_output run_code(std::string_view code, std::chrono::milliseconds timeout = 60s);

  /// Waits for the worker to exit (and reaps it).
  exit_info wait_exit(std::chrono::milliseconds timeout);
  /// What the worker and harness wrote to their own stderr so far.
  std::string diagnostics();

private:
  bool poll_exit();

  std::optional<ipc::segment> seg_;
  std::optional<ipc::doorbell> to_worker_;
  std::optional<ipc::doorbell> to_supervisor_;
  std::optional<ipc::ring_writer> writer_;
  std::optional<ipc::ring_reader> reader_;
  unique_fd stderr_;
  std::string diagnostics_;
  pid_t pid_ = -1;
  exit_info exit_;
  nlohmann::json ready_;
  uint32_t next_request_id_ = 1;
};

/// True while /proc/<pid> exists (a zombie counts: it is not reaped yet).
bool process_exists(pid_t pid);
/// The state letter from /proc/<pid>/stat ('Z' for a zombie), or 0.
char process_state(pid_t pid);
/// The parent pid from /proc/<pid>/stat, or -1.
pid_t parent_of(pid_t pid);
/// Waits (at most `timeout`, a safety net) until `pid` has exited (a zombie
/// counts), on a pidfd rather than by polling; true if it did (or was
/// already gone).
bool wait_until_exited(pid_t pid, std::chrono::milliseconds timeout);
/// Waits (polling /proc/<pid>/syscall, at most `timeout`) until `pid`'s main
/// thread is blocked in system call `nr`: the code before it has run.
bool wait_until_in_syscall(pid_t pid, long nr, std::chrono::milliseconds timeout);

} // namespace castellan::test
