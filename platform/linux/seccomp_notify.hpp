#pragma once

/// @file seccomp_notify.hpp
/// seccomp user notification: the filter that sends chosen system calls to
/// the supervisor (SECCOMP_RET_USER_NOTIF) and the listener through which
/// the supervisor receives them and answers — with an errno, a value, a file
/// descriptor of its own injected into the caller (SECCOMP_IOCTL_NOTIF_ADDFD,
/// then the answer with its number), or "continue".
///
/// The notify filter is a second filter next to the anti-escape filter
/// (seccomp_filter.hpp): the kernel runs every filter and applies the most
/// restrictive action, so a call the anti-escape filter refuses never
/// reaches the supervisor.

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// Which system calls go to the supervisor.
struct notify_spec {
  /// Names (libseccomp's); an unknown name is an error, a name this
  /// architecture lacks (e.g. `open` on aarch64) is skipped.
  std::vector<std::string> syscalls;
  /// open/openat only when they may change something: an access mode other
  /// than O_RDONLY, or O_CREAT, or O_TRUNC (the flags are in a register, so
  /// the filter can see them). creat and openat2 (flags in memory) always.
  bool open_writes_only = false;
  // `sendto` is always listed with an argument filter: only calls that name
  // a destination (dest_addr non-null) are notified; a send on a connected
  // socket has nothing to decide. sendmsg/sendmmsg keep their names in
  // memory and are notified whenever listed.

  bool empty() const noexcept { return syscalls.empty(); }
};

/// Loads the notify filter on this thread and returns its listener fd
/// (close-on-exec). no_new_privs must be set (apply_seccomp does). Every
/// later thread and child inherits the filter; a call in the set blocks
/// until the listener answers, and fails with ENOSYS once every copy of
/// the listener is closed.
///
/// Where the kernel has it (5.19), the filter is loaded with
/// SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV: once the supervisor has received
/// a notification, only a fatal signal ends the caller's wait. A call the
/// supervisor performs on the caller's behalf (an unlink, a rename) can
/// then never be restarted by a signal and performed a second time.
outcome<unique_fd> install_notify_filter(const notify_spec& spec);

/// One notification, copied out of the kernel's structure.
struct notification {
  uint64_t id = 0;
  pid_t pid = 0; ///< thread id of the caller, in the receiver's pid namespace
  int nr = -1;   ///< system call number
  uint32_t arch = 0;
  uint64_t args[6] = {};
};

/// The supervisor's end: receives notifications and answers them.
class notify_listener {
public:
  explicit notify_listener(unique_fd fd) noexcept : fd_(std::move(fd)) {}

  int fd() const noexcept { return fd_.get(); }

  /// Asks the kernel to wake the caller on the answering CPU
  /// (SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP, Linux 6.6): the round trip then
  /// costs a few microseconds instead of a cross-core wake-up. False when
  /// the kernel lacks it (the listener still works).
  bool set_sync_wakeup() noexcept;

  /// The next notification. ENOENT: the caller went away (killed, or its
  /// call was interrupted) between the poll and the receive; EAGAIN/EINTR
  /// as usual. Never blocks if the fd was reported readable.
  outcome<notification> receive() noexcept;

  /// Whether notification `id` is still pending: call it after reading
  /// the caller's memory and before acting on what was read (the caller may
  /// have died and its pid been reused).
  bool id_valid(uint64_t id) const noexcept;

  /// The call fails with `err` (a positive errno).
  outcome<void> respond_error(uint64_t id, int err) noexcept;
  /// The call returns `value`.
  outcome<void> respond_value(uint64_t id, int64_t value) noexcept;
  /// The kernel runs the call itself. Only for calls whose arguments the
  /// caller can no longer change in a way that matters (see docs/security.md).
  outcome<void> respond_continue(uint64_t id) noexcept;

  /// Installs a duplicate of `fd` in the caller (close-on-exec when
  /// `cloexec`), then answers the call with its number. Returns that number.
  /// Safe on a thread that signals or io_uring task work interrupt (see the
  /// definition for why SECCOMP_ADDFD_FLAG_SEND is not); the caller is woken
  /// twice (once to take the fd, once for the answer).
  outcome<int> respond_with_fd(uint64_t id, int fd, bool cloexec) noexcept;

  /// The same in one step (SECCOMP_ADDFD_FLAG_SEND): the caller is woken
  /// once. For a thread that nothing interrupts — all signals blocked, no
  /// io_uring ring queueing task work to it. If the wait for the caller is
  /// interrupted all the same (SIGSTOP, the freezer), the kernel has already
  /// answered the call with 0, not the fd: that is reported as an error with
  /// code EINPROGRESS, and the caller must not be let run on.
  outcome<int> send_fd(uint64_t id, int fd, bool cloexec) noexcept;

  /// Installs a duplicate of `fd` in the caller's table at number `target`,
  /// replacing what is there (SECCOMP_ADDFD_FLAG_SETFD, as dup3 would), and
  /// does not answer the call: the caller keeps waiting for a respond_*.
  outcome<void> install_fd(uint64_t id, int fd, int target, bool cloexec) noexcept;

private:
  unique_fd fd_;
};

// -- handing the listener over ---------------------------------------------
//
// The process that loaded the notify filter holds the only listener, and it
// cannot send it with SCM_RIGHTS: sendmsg may be one of the calls the filter
// hands to the supervisor, which has no listener yet to answer it. So the
// process names the listener's number on a control socket with send() (a
// sendto without an address, which the filter never lists), the supervisor
// takes a duplicate with pidfd_getfd — it learns the sender's pid from the
// socket's credentials — and answers one byte; only then does the process
// close its own copy (a process holding a listener of its own filter could
// answer its own calls).

/// The supervisor's end of the control socket: the kernel must attach the
/// sender's credentials (SO_PASSCRED) before the other end sends anything.
outcome<void> prepare_listener_handover(int control_fd) noexcept;

/// The process's side: names `listener` on `control_fd` and waits for the
/// supervisor's answer. The caller closes `listener` afterwards.
outcome<void> hand_over_listener(int control_fd, int listener) noexcept;

/// The supervisor's side: reads one message from `control_fd` without
/// waiting (EAGAIN: nothing yet), takes the named listener from the sending
/// process and answers. A message that names no listener, or comes without
/// credentials, is refused.
outcome<unique_fd> take_listener(int control_fd) noexcept;

/// True when this kernel has seccomp user notification: checked by the
/// pool before it relies on fd injection (SECCOMP_IOCTL_NOTIF_ADDFD, 5.9).
bool notify_supported() noexcept;

} // namespace castellan::platform
