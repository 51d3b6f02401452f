#pragma once

/// @file process_memory.hpp
/// Bounded reads (and the rare write) of another process's memory, for the supervisor deciding a
/// seccomp notification. The target is hostile: an address may be unmapped,
/// a string may have no terminator, and another thread may rewrite the bytes
/// while they are read. So every read has a length limit, a string is
/// copied once and only the copy is used, and a failure is an error value,
/// never a crash. process_vm_readv is used; where it is refused (kernels
/// without CONFIG_CROSS_MEMORY_ATTACH) /proc/<pid>/mem is read instead.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

class process_memory {
public:
  /// Reads from `pid` (a thread id is fine).
  explicit process_memory(pid_t pid) noexcept : pid_(pid) {}
  /// Reads through `mem_fd`, an open /proc/<pid>/mem of `pid` that the
  /// caller keeps open (it is not closed here).
  process_memory(pid_t pid, int mem_fd) noexcept
    : pid_(pid), use_proc_mem_(true), borrowed_mem_(mem_fd) {}

  /// Copies exactly `len` bytes at `addr` into `out`; a short read (an
  /// unmapped page inside the range) is an error (EFAULT).
  outcome<void> read(uint64_t addr, void* out, std::size_t len) noexcept;

  /// Copies the NUL-terminated string at `addr`, at most `max_len` bytes
  /// before the terminator: a longer one is an error (ENAMETOOLONG). Reads
  /// page by page, so a string ending just before an unmapped page is read.
  outcome<std::string> read_string(uint64_t addr, std::size_t max_len);

  /// Writes exactly `len` bytes at `addr`: for what the kernel itself would
  /// have stored in the caller's memory when the supervisor performs a call
  /// for it (sendmmsg's per-message length). A short write is an error.
  outcome<void> write(uint64_t addr, const void* in, std::size_t len) noexcept;

  pid_t pid() const noexcept { return pid_; }

private:
  /// Bytes read (possibly fewer than asked at an unmapped page), or -errno.
  ssize_t read_some(uint64_t addr, void* out, std::size_t len) noexcept;

  pid_t pid_;
  bool use_proc_mem_ = false; ///< process_vm_readv was refused with ENOSYS/EPERM
  unique_fd mem_;             ///< /proc/<pid>/mem, opened on first use
  int borrowed_mem_ = -1;     ///< a /proc/<pid>/mem the caller holds
};

} // namespace castellan::platform
