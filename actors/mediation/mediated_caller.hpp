#pragma once

/// @file mediated_caller.hpp
/// The thread whose call is being decided, addressed without pid races
/// (private to actors/mediation).
///
/// A notification names its caller by host thread id, a number the kernel
/// hands to another thread once the caller is gone and reaped. So nothing is
/// looked up by that number after the notification has been checked: the
/// caller is opened once — a pidfd, and its /proc/<tid> directory — and
/// SECCOMP_IOCTL_NOTIF_ID_VALID is asked again right after. While the
/// caller waits for its answer it is alive, so both handles were opened on
/// it, and they keep naming it (and nothing else) for as long as they are
/// held: its cwd, fds, status, memory and network namespace are reached
/// through them only.
///
/// Memory is the exception that is looked up by number: its
/// /proc/<tid>/mem is opened once per notification, and every read through
/// it is followed by ID_VALID before what was read is used (while the
/// caller waits, the number is its), so a read of some other process is
/// never acted on. The open is made as the worker (its fsuid, no
/// capability: a dumpable caller's memory is the worker's own), with
/// CAP_SYS_PTRACE only for a caller that is not dumpable. The fd is not
/// kept across notifications: a thread that shared its address space with
/// another process (a vfork child) keeps the thread and the number after
/// its exec, but the old fd would go on reading the other process. A write
/// (sendmmsg's msg_len) goes through the caller's own /proc/<tid>/mem
/// opened from its validated directory.

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan::mediation {

class mediated_caller {
public:
  mediated_caller() = default;
  mediated_caller(pid_t tid, const platform::notify_listener* listener, uint64_t id) noexcept
    : tid_(tid), listener_(listener), id_(id) {}

  /// The host thread id of the notification (for events and logs only).
  pid_t tid() const noexcept { return tid_; }

  /// Whether the caller still waits for this very notification.
  bool still_waiting() const noexcept;
  /// Whether still_waiting() has been true once since the arguments were
  /// copied: from then on memory reads are checked again after each read.
  bool checked() const noexcept { return checked_; }
  /// Records that the arguments were copied and still_waiting() held.
  void mark_checked() noexcept { checked_ = true; }

  /// The caller's /proc/<tid> directory (the host's procfs), opened on
  /// first use and validated: -1 with errno (ESRCH: the caller is gone).
  int proc();
  /// The caller's pidfd (a thread pidfd where the kernel has them).
  int pidfd();

  /// readlink of `rel` below proc() ("cwd", "fd/3"). 0 or an errno
  /// (EBADF for a missing fd; ENOTDIR for a pipe, socket or anonymous
  /// inode; ENOENT for a removed object).
  int link_path(const std::string& rel, std::string& out);
  /// Opens `rel` below proc() with `flags` (magic links followed: "fd/3").
  /// -1 with errno.
  int open_at(const std::string& rel, int flags);
  /// Reads the start of proc()/`rel` ("status", "fdinfo/3") into `buf`
  /// (NUL-terminated); its length, or -1 with errno.
  ssize_t read_small(const std::string& rel, char* buf, std::size_t size);

  /// A duplicate of the caller's fd `fd` (pidfd_getfd): the object it names
  /// now. 0 or an errno (EBADF when the caller has no such fd).
  int dup_fd(int fd, unique_fd& out);

  /// The caller's thread group id and thread id in its own (innermost) pid
  /// namespace, as the sandbox's procfs names them. 0 or an errno.
  int ns_ids(long& tgid, long& tid);

  /// The caller's file-system uid and gid (the fourth field of the Uid:
  /// and Gid: lines of its status). 0 or an errno.
  int fs_ids(long& uid, long& gid);

  /// Copies exactly `len` bytes at `addr`; EFAULT for an unmapped page.
  outcome<void> read(uint64_t addr, void* out, std::size_t len);
  /// Copies the NUL-terminated string at `addr` (at most `max_len` bytes).
  outcome<std::string> read_string(uint64_t addr, std::size_t max_len);
  /// Writes exactly `len` bytes at `addr` through the caller's own
  /// /proc/<tid>/mem.
  outcome<void> write(uint64_t addr, const void* in, std::size_t len);

private:
  /// After a handle was opened: the caller must still be waiting, or the
  /// handle may name another thread that got the number.
  int validate_new_handle(unique_fd& handle);
  /// After a read by number, once the arguments were checked.
  outcome<void> recheck(outcome<void> r);
  /// The caller's /proc/<tid>/mem for this notification (opened on first
  /// use); -1 when it cannot be opened.
  int memory_fd();
  /// Runs `read` on a process_memory of the caller: through memory_fd(),
  /// else with process_vm_readv.
  template <class T, class Read>
  outcome<T> read_memory(Read read);

  pid_t tid_ = 0;
  const platform::notify_listener* listener_ = nullptr;
  uint64_t id_ = 0;
  bool checked_ = false;
  unique_fd proc_;
  unique_fd pidfd_;
  unique_fd mem_;
  long ns_tgid_ = 0;
  long ns_tid_ = 0;
};

} // namespace castellan::mediation
