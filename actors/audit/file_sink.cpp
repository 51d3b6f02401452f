#include "actors/audit/file_sink.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace castellan {

namespace {

using clock_type = std::chrono::steady_clock;

// Lines are gathered into writes of about this size: few system calls under a
// flood, small enough that a rotation boundary is never far off.
constexpr size_t write_chunk_bytes = 256 * 1024;

int open_log(const std::string& path) {
  return ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
}

std::string rotated_name(const std::string& path, uint32_t n) {
  return path + "." + std::to_string(n);
}

std::string parent_dir(const std::string& path) {
  const auto slash = path.rfind('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

} // namespace

outcome<std::unique_ptr<file_sink>> file_sink::open(const file_sink_config& cfg) {
  if (cfg.path.empty())
    return logic_failure("audit file sink: empty path");
  const int fd = open_log(cfg.path);
  if (fd < 0)
    return errno_failure("open audit log " + cfg.path);
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    auto err = errno_failure("stat audit log " + cfg.path);
    ::close(fd);
    return err;
  }
  return std::unique_ptr<file_sink>(
      new file_sink(cfg, fd, true, static_cast<uint64_t>(st.st_size)));
}

std::unique_ptr<file_sink> file_sink::attach(int fd, const file_sink_config& cfg) {
  auto c = cfg;
  c.max_bytes = 0;
  c.fsync = fsync_policy::never;
  return std::unique_ptr<file_sink>(new file_sink(c, fd, false, 0));
}

file_sink::file_sink(const file_sink_config& cfg, int fd, bool owns_fd, uint64_t size)
    : cfg_(cfg), fd_(fd), owns_fd_(owns_fd), file_size_(size) {
  writer_ = std::thread([this] { run(); });
}

file_sink::~file_sink() {
  {
    std::lock_guard<std::mutex> lk(mtx_);
    stop_ = true;
  }
  work_cv_.notify_all();
  space_cv_.notify_all();
  if (writer_.joinable())
    writer_.join();
  if (owns_fd_ && fd_ >= 0)
    ::close(fd_);
}

file_sink::push_status file_sink::push(std::string line) {
  line.push_back('\n');
  const uint64_t size = line.size();
  const uint64_t max_records = std::max<uint32_t>(cfg_.queue_records, 1);
  std::unique_lock<std::mutex> lk(mtx_);
  if (stop_)
    return push_status::closed;
  // An empty queue always takes a line, however long, so that an oversized
  // record cannot wedge the sink.
  auto has_room = [&] {
    return stop_ || queue_.empty() ||
           (queue_.size() < max_records && queued_bytes_ + size <= cfg_.queue_bytes);
  };
  if (!space_cv_.wait_for(lk, std::chrono::milliseconds(cfg_.block_timeout_ms), has_room)) {
    ++stats_.dropped;
    return push_status::timed_out;
  }
  if (stop_)
    return push_status::closed;
  queue_.push_back(std::move(line));
  queued_bytes_ += size;
  ++stats_.pushed;
  stats_.queue_high_water = std::max<uint64_t>(stats_.queue_high_water, queue_.size());
  stats_.queue_bytes_high_water = std::max(stats_.queue_bytes_high_water, queued_bytes_);
  lk.unlock();
  work_cv_.notify_one();
  return push_status::queued;
}

bool file_sink::flush(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lk(mtx_);
  const uint64_t target = stats_.pushed;
  sync_wanted_ = std::max(sync_wanted_, target);
  work_cv_.notify_one();
  return done_cv_.wait_for(lk, timeout, [&] { return synced_seq_ >= target; });
}

file_sink_stats file_sink::stats() const {
  std::lock_guard<std::mutex> lk(mtx_);
  return stats_;
}

uint64_t file_sink::queued() const {
  std::lock_guard<std::mutex> lk(mtx_);
  return queue_.size();
}

bool file_sink::congested() const {
  const uint64_t records = std::max<uint32_t>(cfg_.queue_records, 1);
  std::lock_guard<std::mutex> lk(mtx_);
  return queue_.size() * 4 >= records * 3 || queued_bytes_ * 4 >= cfg_.queue_bytes * 3;
}

void file_sink::run() {
  const bool may_sync = owns_fd_ && cfg_.fsync != fsync_policy::never;
  const auto interval = std::chrono::milliseconds(std::max<uint32_t>(cfg_.fsync_interval_ms, 1));
  auto next_sync = clock_type::now() + interval;
  std::unique_lock<std::mutex> lk(mtx_);
  for (;;) {
    auto ready = [&] { return stop_ || !queue_.empty() || sync_wanted_ > synced_seq_; };
    if (may_sync && dirty_ && cfg_.fsync == fsync_policy::interval)
      work_cv_.wait_until(lk, next_sync, ready);
    else
      work_cv_.wait(lk, ready);
    std::deque<std::string> batch;
    batch.swap(queue_);
    queued_bytes_ = 0;
    const bool stopping = stop_;
    const bool sync_requested = sync_wanted_ > synced_seq_;
    lk.unlock();
    space_cv_.notify_all();

    const uint64_t n = batch.size();
    if (n > 0)
      write_batch(batch);
    if (may_sync && dirty_) {
      const auto now = clock_type::now();
      if (stopping || sync_requested || now >= next_sync) {
        sync();
        next_sync = now + interval;
      }
    }

    lk.lock();
    done_seq_ += n;
    if (!may_sync || !dirty_)
      synced_seq_ = done_seq_;
    done_cv_.notify_all();
    if (stopping && queue_.empty())
      break;
  }
}

void file_sink::write_batch(std::deque<std::string>& batch) {
  std::string buf;
  uint64_t lines = 0;
  for (auto& line : batch) {
    const uint64_t pending = file_size_ + buf.size();
    if (owns_fd_ && cfg_.max_bytes > 0 && pending > 0 && pending + line.size() > cfg_.max_bytes) {
      write_buffer(buf, lines);
      lines = 0;
      rotate();
    }
    buf += line;
    ++lines;
    if (buf.size() >= write_chunk_bytes) {
      write_buffer(buf, lines);
      lines = 0;
    }
  }
  write_buffer(buf, lines);
}

void file_sink::write_buffer(std::string& buf, uint64_t lines) {
  if (buf.empty())
    return;
  if (fd_ < 0 && owns_fd_) {
    // A failed reopen after rotation: try again rather than give up for good.
    fd_ = open_log(cfg_.path);
    if (fd_ < 0) {
      record_error(errno_failure("reopen audit log " + cfg_.path));
      std::lock_guard<std::mutex> lk(mtx_);
      stats_.dropped += lines;
      buf.clear();
      return;
    }
    file_size_ = 0;
  }
  size_t off = 0;
  while (off < buf.size()) {
    const auto n = ::write(fd_, buf.data() + off, buf.size() - off);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      record_error(errno_failure("write audit log " + cfg_.path));
      std::lock_guard<std::mutex> lk(mtx_);
      // A partial write leaves a torn line; count the whole buffer as lost
      // because no line of it can be vouched for.
      stats_.dropped += lines;
      buf.clear();
      return;
    }
    off += static_cast<size_t>(n);
  }
  file_size_ += buf.size();
  dirty_ = owns_fd_;
  {
    std::lock_guard<std::mutex> lk(mtx_);
    stats_.written += lines;
    stats_.bytes_written += buf.size();
    ++stats_.writes;
  }
  buf.clear();
  if (owns_fd_ && cfg_.fsync == fsync_policy::every_record)
    sync();
}

void file_sink::sync() {
  if (fd_ < 0)
    return;
  if (::fdatasync(fd_) != 0) {
    record_error(errno_failure("fdatasync audit log " + cfg_.path));
    return;
  }
  dirty_ = false;
  std::lock_guard<std::mutex> lk(mtx_);
  ++stats_.fsyncs;
}

void file_sink::rotate() {
  if (dirty_ && cfg_.fsync != fsync_policy::never)
    sync();
  if (fd_ >= 0)
    ::close(fd_);
  fd_ = -1;
  if (cfg_.max_files == 0) {
    if (::unlink(cfg_.path.c_str()) != 0 && errno != ENOENT)
      record_error(errno_failure("unlink audit log " + cfg_.path));
  } else {
    for (uint32_t i = cfg_.max_files - 1; i >= 1; --i) {
      const auto from = rotated_name(cfg_.path, i);
      if (::rename(from.c_str(), rotated_name(cfg_.path, i + 1).c_str()) != 0 && errno != ENOENT)
        record_error(errno_failure("rotate audit log " + from));
    }
    if (::rename(cfg_.path.c_str(), rotated_name(cfg_.path, 1).c_str()) != 0)
      record_error(errno_failure("rotate audit log " + cfg_.path));
  }
  fd_ = open_log(cfg_.path);
  if (fd_ < 0)
    record_error(errno_failure("reopen audit log " + cfg_.path));
  file_size_ = 0;
  if (cfg_.fsync != fsync_policy::never) {
    // The renames are durable only once the directory is synced.
    const int dir = ::open(parent_dir(cfg_.path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir >= 0) {
      ::fsync(dir);
      ::close(dir);
    }
  }
  std::lock_guard<std::mutex> lk(mtx_);
  ++stats_.rotations;
}

void file_sink::record_error(const failure& err) {
  std::lock_guard<std::mutex> lk(mtx_);
  ++stats_.write_errors;
  stats_.last_error = err.describe();
}

} // namespace castellan
