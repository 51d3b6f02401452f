#pragma once

/// @file file_sink.hpp
/// The JSON-lines sink: a bounded queue drained by a dedicated writer thread,
/// size-based rotation (path → path.1 → … → path.max_files) and a configurable
/// fsync policy. No CAF: the audit actor pushes encoded lines into it.
///
/// Why a thread: write(2) and fdatasync(2) block for as long as the disk
/// wants, and must never do so on a CAF scheduler thread. Why bounded: the
/// queue is the only buffer between the actor and the disk, so its bound is
/// the audit's memory bound. When it is full, `push` blocks (backpressure,
/// nothing lost) up to `block_timeout_ms`; only a disk stalled longer than
/// that makes a push fail, and the failure is counted, never silent.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "actors/audit/audit_messages.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// What a file sink did so far.
struct file_sink_stats {
  uint64_t pushed = 0;  ///< lines accepted into the queue
  uint64_t written = 0; ///< lines written to the file
  uint64_t bytes_written = 0;
  uint64_t writes = 0; ///< write(2) batches
  uint64_t fsyncs = 0;
  uint64_t rotations = 0;
  uint64_t write_errors = 0;
  uint64_t dropped = 0;                ///< lines lost: push timed out, or their write failed
  uint64_t queue_high_water = 0;       ///< most lines ever queued at once
  uint64_t queue_bytes_high_water = 0; ///< most bytes ever queued at once
  std::string last_error;
};

class file_sink {
public:
  enum class push_status { queued, timed_out, closed };

  /// Opens (creating or appending to) `cfg.path` and starts the writer.
  static outcome<std::unique_ptr<file_sink>> open(const file_sink_config& cfg);

  /// Writes to `fd` (stdout, stderr), which it does not own: no rotation, no
  /// fsync, same queue and backpressure.
  static std::unique_ptr<file_sink> attach(int fd, const file_sink_config& cfg);

  file_sink(const file_sink&) = delete;
  file_sink& operator=(const file_sink&) = delete;

  /// Writes everything still queued, syncs (unless the policy is `never`) and
  /// stops the writer.
  ~file_sink();

  /// Queues `line` (a newline is appended). Blocks while the queue is full,
  /// at most `block_timeout_ms`.
  push_status push(std::string line);

  /// Waits until every line pushed before the call is written, and synced
  /// unless the policy is `never`. False on timeout.
  bool flush(std::chrono::milliseconds timeout);

  file_sink_stats stats() const;

  /// Lines waiting in the queue now.
  uint64_t queued() const;

  /// True when the queue is at least three quarters full, in records or in
  /// bytes: the audit actor
  /// then withholds its producers' credits (audit_credits.hpp) so that they
  /// hold new work back before pushes start to block.
  bool congested() const;

  const file_sink_config& config() const noexcept { return cfg_; }

private:
  file_sink(const file_sink_config& cfg, int fd, bool owns_fd, uint64_t size);

  void run();
  void write_batch(std::deque<std::string>& batch);
  void write_buffer(std::string& buf, uint64_t lines);
  void sync();
  void rotate();
  void record_error(const failure& err);

  const file_sink_config cfg_;
  int fd_;
  const bool owns_fd_;
  uint64_t file_size_; ///< writer thread only
  bool dirty_ = false; ///< writer thread only: written but not synced

  mutable std::mutex mtx_;
  std::condition_variable work_cv_;  ///< the writer waits for lines or a flush
  std::condition_variable space_cv_; ///< `push` waits for room
  std::condition_variable done_cv_;  ///< `flush` waits for progress
  std::deque<std::string> queue_;
  uint64_t queued_bytes_ = 0;
  uint64_t done_seq_ = 0;    ///< lines handled (written or failed), in push order
  uint64_t synced_seq_ = 0;  ///< lines handled and synced
  uint64_t sync_wanted_ = 0; ///< a flush wants everything up to here synced
  bool stop_ = false;
  file_sink_stats stats_;

  std::thread writer_; // last: starts after every other member exists
};

} // namespace castellan
