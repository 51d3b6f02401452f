#include "platform/linux/seccomp_notify.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

namespace castellan::platform {

namespace {

// Newer than the uapi headers of this distribution (Linux 6.6).
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif
#ifndef SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV
#define SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV (1UL << 5)
#endif

struct ctx_deleter {
  void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
};

/// The kernel's notification size may exceed our struct (a newer kernel
/// appends fields); it insists on a zeroed buffer of its size.
std::size_t kernel_notif_size() noexcept {
  static const std::size_t size = [] {
    seccomp_notif_sizes sizes{};
    if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0)
      return sizeof(seccomp_notif);
    return std::max<std::size_t>(sizes.seccomp_notif, sizeof(seccomp_notif));
  }();
  return size;
}

outcome<void> add_open_write_rules(scmp_filter_ctx ctx, int nr, unsigned flags_arg) {
  const scmp_datum_t accmode = O_ACCMODE;
  const scmp_arg_cmp cmps[] = {
      SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, accmode, O_WRONLY),
      SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, accmode, O_RDWR),
      // O_ACCMODE == 3 is "no access" with ioctl-only semantics: mediate it too.
      SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, accmode, O_ACCMODE),
      SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, O_CREAT, O_CREAT),
      SCMP_CMP(flags_arg, SCMP_CMP_MASKED_EQ, O_TRUNC, O_TRUNC),
  };
  for (const auto& cmp : cmps) {
    const int rc = seccomp_rule_add_exact_array(ctx, SCMP_ACT_NOTIFY, nr, 1, &cmp);
    if (rc != 0)
      return errno_failure("seccomp_rule_add (notify, open flags)", -rc);
  }
  return {};
}

/// Loads the program libseccomp built for `ctx` with a new listener. libseccomp
/// 2.5 cannot ask for SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV, so the program
/// is exported and loaded here; a kernel without the flag (before 5.19) gets
/// the filter without it.
outcome<unique_fd> load_with_listener(scmp_filter_ctx ctx) {
  unique_fd mem(::memfd_create("castellan-notify-bpf", MFD_CLOEXEC));
  if (!mem)
    return errno_failure("seccomp notify: memfd_create");
  if (const int rc = seccomp_export_bpf(ctx, mem.get()); rc != 0)
    return errno_failure("seccomp notify: seccomp_export_bpf", -rc);
  struct stat st;
  if (::fstat(mem.get(), &st) != 0)
    return errno_failure("seccomp notify: fstat of the exported program");
  const auto size = static_cast<std::size_t>(st.st_size);
  if (size == 0 || size % sizeof(sock_filter) != 0 || size / sizeof(sock_filter) > BPF_MAXINSNS)
    return logic_failure("seccomp notify: libseccomp exported a program of " +
                         std::to_string(size) + " bytes");
  std::vector<sock_filter> insns(size / sizeof(sock_filter));
  if (::pread(mem.get(), insns.data(), size, 0) != static_cast<ssize_t>(size))
    return errno_failure("seccomp notify: read the exported program");
  sock_fprog prog{static_cast<unsigned short>(insns.size()), insns.data()};
  // libseccomp's own load sets no_new_privs first (its default): so do we.
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return errno_failure("seccomp notify: PR_SET_NO_NEW_PRIVS");
  for (const unsigned long flags :
       {SECCOMP_FILTER_FLAG_NEW_LISTENER | SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV,
        static_cast<unsigned long>(SECCOMP_FILTER_FLAG_NEW_LISTENER)}) {
    // The listener comes back close-on-exec.
    const long fd = ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &prog);
    if (fd >= 0)
      return unique_fd(static_cast<int>(fd));
    if (errno != EINVAL)
      break;
  }
  return errno_failure("seccomp notify: load the filter");
}

} // namespace

outcome<unique_fd> install_notify_filter(const notify_spec& spec) {
  if (spec.empty())
    return logic_failure("seccomp notify: no system call to notify");
  std::unique_ptr<void, ctx_deleter> ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx)
    return logic_failure("seccomp notify: seccomp_init failed");
  for (const auto& name : spec.syscalls) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr == __NR_SCMP_ERROR)
      return logic_failure("seccomp notify: unknown system call '" + name + "'");
    if (nr < 0)
      continue; // a pseudo number: not a call of this architecture
    const bool open_like = name == "open" || name == "openat";
    if (spec.open_writes_only && open_like) {
      if (auto r = add_open_write_rules(ctx.get(), nr, name == "open" ? 1u : 2u); !r)
        return r.error().wrap("seccomp notify: " + name);
      continue;
    }
    if (name == "sendto") {
      // Only a send that names its destination has something to decide.
      const scmp_arg_cmp named = SCMP_CMP(4, SCMP_CMP_NE, 0);
      if (const int rc = seccomp_rule_add_exact_array(ctx.get(), SCMP_ACT_NOTIFY, nr, 1, &named);
          rc != 0)
        return errno_failure("seccomp notify: seccomp_rule_add sendto", -rc);
      continue;
    }
    if (const int rc = seccomp_rule_add_exact(ctx.get(), SCMP_ACT_NOTIFY, nr, 0); rc != 0)
      return errno_failure("seccomp notify: seccomp_rule_add " + name, -rc);
  }
  return load_with_listener(ctx.get());
}

bool notify_listener::set_sync_wakeup() noexcept {
  return ::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
}

outcome<notification> notify_listener::receive() noexcept {
  const std::size_t size = kernel_notif_size();
  alignas(seccomp_notif) unsigned char buf[256];
  if (size > sizeof buf)
    return logic_failure("seccomp notify: the kernel's notification is " + std::to_string(size) +
                         " bytes");
  std::memset(buf, 0, size);
  if (::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_RECV, buf) != 0)
    return errno_failure("seccomp notify: receive");
  seccomp_notif raw;
  std::memcpy(&raw, buf, sizeof raw);
  notification n;
  n.id = raw.id;
  n.pid = static_cast<pid_t>(raw.pid);
  n.nr = raw.data.nr;
  n.arch = raw.data.arch;
  for (int i = 0; i < 6; ++i)
    n.args[i] = raw.data.args[i];
  return n;
}

bool notify_listener::id_valid(uint64_t id) const noexcept {
  return ::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0;
}

namespace {

outcome<void> send_response(int fd, uint64_t id, int err, int64_t val, uint32_t flags) noexcept {
  seccomp_notif_resp resp{};
  resp.id = id;
  resp.error = err == 0 ? 0 : -err;
  resp.val = val;
  resp.flags = flags;
  if (::ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp) != 0)
    return errno_failure("seccomp notify: respond");
  return {};
}

} // namespace

outcome<void> notify_listener::respond_error(uint64_t id, int err) noexcept {
  return send_response(fd_.get(), id, err, 0, 0);
}

outcome<void> notify_listener::respond_value(uint64_t id, int64_t value) noexcept {
  return send_response(fd_.get(), id, 0, value, 0);
}

outcome<void> notify_listener::respond_continue(uint64_t id) noexcept {
  return send_response(fd_.get(), id, 0, 0, SECCOMP_USER_NOTIF_FLAG_CONTINUE);
}

outcome<void> notify_listener::install_fd(uint64_t id, int fd, int target, bool cloexec) noexcept {
  seccomp_notif_addfd add{};
  add.id = id;
  add.flags = SECCOMP_ADDFD_FLAG_SETFD;
  add.srcfd = static_cast<uint32_t>(fd);
  add.newfd = static_cast<uint32_t>(target);
  add.newfd_flags = cloexec ? O_CLOEXEC : 0;
  if (::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_ADDFD, &add) < 0)
    return errno_failure("seccomp notify: install fd " + std::to_string(target));
  return {};
}

outcome<int> notify_listener::respond_with_fd(uint64_t id, int fd, bool cloexec) noexcept {
  // Not SECCOMP_ADDFD_FLAG_SEND. With it the kernel marks the call answered
  // before it waits for the caller to take the fd; when that wait is
  // interrupted (a signal, or io_uring task work queued for this thread,
  // which is how the pool's event source gets its completions) it withdraws
  // the fd but not the mark: the restarted ioctl fails with EINPROGRESS and
  // the caller's system call returns 0, an fd it never asked for. A plain
  // addfd leaves the call pending while it waits, so its restart simply
  // adds the fd again; the answer follows.
  seccomp_notif_addfd add{};
  add.id = id;
  add.flags = 0;
  add.srcfd = static_cast<uint32_t>(fd);
  add.newfd = 0;
  add.newfd_flags = cloexec ? O_CLOEXEC : 0;
  int rc;
  do
    rc = ::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_ADDFD, &add);
  while (rc < 0 && errno == EINTR);
  if (rc < 0)
    return errno_failure("seccomp notify: add fd");
  // The caller is still waiting: nothing it does can reuse that number
  // before it sees the answer, except closing it itself.
  if (auto sent = send_response(fd_.get(), id, 0, rc, 0); !sent)
    return sent.error();
  return rc;
}

outcome<int> notify_listener::send_fd(uint64_t id, int fd, bool cloexec) noexcept {
  seccomp_notif_addfd add{};
  add.id = id;
  add.flags = SECCOMP_ADDFD_FLAG_SEND;
  add.srcfd = static_cast<uint32_t>(fd);
  add.newfd = 0;
  add.newfd_flags = cloexec ? O_CLOEXEC : 0;
  const int rc = ::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_ADDFD, &add);
  if (rc >= 0)
    return rc;
  // Interrupted (EINTR), or interrupted and restarted (EINPROGRESS: the call
  // is marked answered): either way the caller got 0. Not retried.
  if (errno == EINTR || errno == EINPROGRESS)
    return failure{EINPROGRESS,
                   "seccomp notify: the fd answer was interrupted; the caller got 0 instead"};
  return errno_failure("seccomp notify: send fd");
}

namespace {

constexpr const char* handover_word = "LISTENER ";
constexpr char handover_ack = 'K';

} // namespace

outcome<void> prepare_listener_handover(int control_fd) noexcept {
  const int on = 1;
  if (::setsockopt(control_fd, SOL_SOCKET, SO_PASSCRED, &on, sizeof on) != 0)
    return errno_failure("seccomp notify: SO_PASSCRED on the control socket");
  return {};
}

outcome<void> hand_over_listener(int control_fd, int listener) noexcept {
  char msg[32];
  const int len = std::snprintf(msg, sizeof msg, "%s%d", handover_word, listener);
  // send() is sendto(..., NULL, 0): the filter lets it through.
  if (::send(control_fd, msg, static_cast<std::size_t>(len), MSG_NOSIGNAL) != len)
    return errno_failure("seccomp notify: name the listener on the control socket");
  char ack = 0;
  for (;;) {
    const ssize_t n = ::recv(control_fd, &ack, 1, 0);
    if (n == 1 && ack == handover_ack)
      return {};
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_failure("seccomp notify: wait for the supervisor to take the listener");
    return logic_failure("seccomp notify: the supervisor did not take the listener");
  }
}

outcome<unique_fd> take_listener(int control_fd) noexcept {
  char msg[64];
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred)) + CMSG_SPACE(8 * sizeof(int))];
  iovec iov{msg, sizeof msg - 1};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(control_fd, &h, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
  if (n < 0)
    return errno_failure("seccomp notify: read the control socket");
  if (n == 0)
    return errno_failure("seccomp notify: the control socket was closed", EPIPE);
  const ucred* cred = nullptr;
  for (cmsghdr* cm = CMSG_FIRSTHDR(&h); cm != nullptr; cm = CMSG_NXTHDR(&h, cm)) {
    if (cm->cmsg_level != SOL_SOCKET)
      continue;
    if (cm->cmsg_type == SCM_CREDENTIALS && cm->cmsg_len >= CMSG_LEN(sizeof(ucred)))
      cred = reinterpret_cast<const ucred*>(CMSG_DATA(cm));
    else if (cm->cmsg_type == SCM_RIGHTS) // never expected: close what came
      for (std::size_t i = 0; i < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); ++i) {
        int fd = -1;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
        ::close(fd);
      }
  }
  msg[n] = '\0';
  const std::size_t word = std::strlen(handover_word);
  char* end = nullptr;
  const long number =
      std::strncmp(msg, handover_word, word) == 0 ? std::strtol(msg + word, &end, 10) : -1;
  if (number < 0 || number > INT32_MAX || end == nullptr || *end != '\0')
    return logic_failure("seccomp notify: the control socket named no listener");
  if (cred == nullptr || cred->pid <= 0)
    return logic_failure("seccomp notify: the listener's sender has no credentials");
  unique_fd process(static_cast<int>(::syscall(SYS_pidfd_open, cred->pid, 0)));
  if (!process)
    return errno_failure("seccomp notify: pidfd_open " + std::to_string(cred->pid));
  unique_fd listener(
      static_cast<int>(::syscall(SYS_pidfd_getfd, process.get(), static_cast<int>(number), 0)));
  if (!listener)
    return errno_failure("seccomp notify: pidfd_getfd " + std::to_string(number) + " of pid " +
                         std::to_string(cred->pid));
  // A listener is an anonymous inode named "[seccomp]": anything else is refused.
  char link[64];
  const std::string self = "/proc/self/fd/" + std::to_string(listener.get());
  const ssize_t ln = ::readlink(self.c_str(), link, sizeof link - 1);
  if (ln <= 0 ||
      std::string_view(link, static_cast<std::size_t>(ln)) != "anon_inode:seccomp notify")
    return logic_failure("seccomp notify: fd " + std::to_string(number) + " of pid " +
                         std::to_string(cred->pid) + " is not a seccomp listener");
  if (::send(control_fd, &handover_ack, 1, MSG_DONTWAIT | MSG_NOSIGNAL) != 1)
    return errno_failure("seccomp notify: answer the listener's sender");
  return listener;
}

bool notify_supported() noexcept {
  // The kernel must know SECCOMP_RET_USER_NOTIF (5.0); ADDFD (5.9) has no
  // probe of its own and is reported when first used.
  uint32_t action = SECCOMP_RET_USER_NOTIF;
  return ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

} // namespace castellan::platform
