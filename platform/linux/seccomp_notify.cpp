#include "platform/linux/seccomp_notify.hpp"

#include <fcntl.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>

namespace castellan::platform {

namespace {

// Newer than the uapi headers of this distribution (Linux 6.6).
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#endif
#ifndef SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
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
    if (const int rc = seccomp_rule_add_exact(ctx.get(), SCMP_ACT_NOTIFY, nr, 0); rc != 0)
      return errno_failure("seccomp notify: seccomp_rule_add " + name, -rc);
  }
  if (const int rc = seccomp_load(ctx.get()); rc != 0)
    return errno_failure("seccomp notify: seccomp_load", -rc);
  const int fd = seccomp_notify_fd(ctx.get());
  if (fd < 0)
    return errno_failure("seccomp notify: seccomp_notify_fd", -fd);
  // libseccomp keeps its own copy of the number: take a CLOEXEC duplicate
  // and leave the context to close the original.
  unique_fd own(::fcntl(fd, F_DUPFD_CLOEXEC, 3));
  if (!own)
    return errno_failure("seccomp notify: dup listener");
  return own;
}

bool notify_listener::set_sync_wakeup() noexcept {
  return ::ioctl(fd_.get(), SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP) == 0;
}

outcome<notification> notify_listener::receive() noexcept {
  const std::size_t size = kernel_notif_size();
  alignas(seccomp_notif) unsigned char buf[256];
  if (size > sizeof buf)
    return logic_failure("seccomp notify: the kernel's notification is " +
                         std::to_string(size) + " bytes");
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

bool notify_supported() noexcept {
  // The kernel must know SECCOMP_RET_USER_NOTIF (5.0); ADDFD (5.9) has no
  // probe of its own and is reported when first used.
  uint32_t action = SECCOMP_RET_USER_NOTIF;
  return ::syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &action) == 0;
}

} // namespace castellan::platform
