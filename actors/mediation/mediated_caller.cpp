#include "actors/mediation/mediated_caller.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "actors/mediation/mediation_privileges.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "platform/linux/process_memory.hpp"

namespace castellan::mediation {

namespace {

#ifndef PIDFD_THREAD
#define PIDFD_THREAD O_EXCL
#endif

/// The last (innermost namespace's) number of a "NStgid:"/"NSpid:" line of
/// /proc/<tid>/status; 0 if missing.
long innermost(const char* status, const char* key) {
  const char* line = std::strstr(status, key);
  if (line == nullptr)
    return 0;
  line += std::strlen(key);
  const char* end = std::strchr(line, '\n');
  long last = 0;
  for (const char* p = line; end == nullptr || p < end;) {
    char* next = nullptr;
    const long v = std::strtol(p, &next, 10);
    if (next == p)
      break;
    last = v;
    p = next;
  }
  return last;
}

} // namespace

bool mediated_caller::still_waiting() const noexcept {
  return listener_ != nullptr && listener_->id_valid(id_);
}

int mediated_caller::validate_new_handle(unique_fd& handle) {
  if (!handle)
    return -1;
  if (!still_waiting()) {
    handle.reset();
    errno = ESRCH;
    return -1;
  }
  return handle.get();
}

int mediated_caller::proc() {
  if (proc_)
    return proc_.get();
  const std::string path = "/proc/" + std::to_string(tid_);
  unique_fd fd(::open(path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (!fd && errno == ENOENT)
    errno = ESRCH;
  if (validate_new_handle(fd) < 0)
    return -1;
  proc_ = std::move(fd);
  return proc_.get();
}

int mediated_caller::pidfd() {
  if (pidfd_)
    return pidfd_.get();
  long fd = ::syscall(SYS_pidfd_open, tid_, PIDFD_THREAD);
  if (fd < 0 && errno == EINVAL)
    fd = ::syscall(SYS_pidfd_open, tid_, 0); // before 6.9: thread group leaders only
  unique_fd handle(fd < 0 ? -1 : static_cast<int>(fd));
  if (validate_new_handle(handle) < 0)
    return -1;
  pidfd_ = std::move(handle);
  return pidfd_.get();
}

int mediated_caller::link_path(const std::string& rel, std::string& out) {
  const int dir = proc();
  if (dir < 0)
    return errno;
  char buf[PATH_MAX];
  ssize_t n = 0;
  {
    // The caller's cwd and fd links are ptrace-read checked; it may be
    // non-dumpable.
    raised_capabilities step(ptrace_cap());
    n = ::readlinkat(dir, rel.c_str(), buf, sizeof buf);
  }
  return link_target(buf, n, sizeof buf, out);
}

int mediated_caller::open_at(const std::string& rel, int flags) {
  const int dir = proc();
  if (dir < 0)
    return -1;
  raised_capabilities step(ptrace_cap());
  return ::openat(dir, rel.c_str(), flags | O_CLOEXEC);
}

ssize_t mediated_caller::read_small(const std::string& rel, char* buf, std::size_t size) {
  if (size == 0)
    return -1;
  unique_fd fd(open_at(rel, O_RDONLY));
  if (!fd)
    return -1;
  const ssize_t n = ::read(fd.get(), buf, size - 1);
  if (n < 0)
    return -1;
  buf[n] = '\0';
  return n;
}

int mediated_caller::dup_fd(int fd, unique_fd& out) {
  const int pfd = pidfd();
  if (pfd < 0)
    return errno;
  long dup = -1;
  {
    raised_capabilities step(ptrace_cap());
    dup = ::syscall(SYS_pidfd_getfd, pfd, fd, 0);
  }
  if (dup < 0)
    return errno;
  out.reset(static_cast<int>(dup));
  return 0;
}

int mediated_caller::ns_ids(long& tgid, long& tid) {
  if (ns_tgid_ == 0) {
    char buf[4096];
    if (read_small("status", buf, sizeof buf) <= 0)
      return ESRCH;
    const long g = innermost(buf, "\nNStgid:");
    const long t = innermost(buf, "\nNSpid:");
    if (g <= 0 || t <= 0)
      return ESRCH;
    ns_tgid_ = g;
    ns_tid_ = t;
  }
  tgid = ns_tgid_;
  tid = ns_tid_;
  return 0;
}

int mediated_caller::fs_ids(long& uid, long& gid) {
  char buf[4096];
  if (read_small("status", buf, sizeof buf) <= 0)
    return ESRCH;
  auto fourth = [&](const char* key) -> long {
    const char* line = std::strstr(buf, key);
    if (line == nullptr)
      return -1;
    const char* p = line + std::strlen(key);
    long v = -1;
    for (int i = 0; i < 4; ++i) {
      char* next = nullptr;
      v = std::strtol(p, &next, 10);
      if (next == p)
        return -1;
      p = next;
    }
    return v;
  };
  uid = fourth("\nUid:");
  gid = fourth("\nGid:");
  return uid >= 0 && gid >= 0 ? 0 : ESRCH;
}

outcome<void> mediated_caller::recheck(outcome<void> r) {
  if (r && checked_ && !still_waiting())
    return errno_failure("read memory of the caller", ESRCH);
  return r;
}

int mediated_caller::memory_fd() {
  if (mem_)
    return mem_.get();
  const std::string path = "/proc/" + std::to_string(tid_) + "/mem";
  // As the worker first: a dumpable caller's memory is its own uid's.
  mem_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!mem_ && (errno == EACCES || errno == EPERM)) {
    raised_capabilities step(ptrace_cap());
    mem_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  }
  return mem_ ? mem_.get() : -1;
}

template <class T, class Read>
outcome<T> mediated_caller::read_memory(Read read) {
  if (const int fd = memory_fd(); fd >= 0) {
    platform::process_memory mem(tid_, fd);
    auto r = read(mem);
    // /proc/<tid>/mem says EIO where process_vm_readv says EFAULT.
    if (!r && r.error().code == EIO)
      return errno_failure("read memory of the caller", EFAULT);
    return r;
  }
  platform::process_memory mem(tid_);
  raised_capabilities step(ptrace_cap());
  return read(mem);
}

outcome<void> mediated_caller::read(uint64_t addr, void* out, std::size_t len) {
  return recheck(read_memory<void>(
      [&](platform::process_memory& mem) { return mem.read(addr, out, len); }));
}

outcome<std::string> mediated_caller::read_string(uint64_t addr, std::size_t max_len) {
  auto s = read_memory<std::string>(
      [&](platform::process_memory& mem) { return mem.read_string(addr, max_len); });
  if (s && checked_ && !still_waiting())
    return errno_failure("read memory of the caller", ESRCH);
  return s;
}

outcome<void> mediated_caller::write(uint64_t addr, const void* in, std::size_t len) {
  unique_fd mem(open_at("mem", O_WRONLY));
  if (!mem)
    return errno_failure("open the caller's memory");
  if (addr > static_cast<uint64_t>(INT64_MAX) || addr + len < addr)
    return errno_failure("write the caller's memory", EFAULT);
  const ssize_t n = ::pwrite(mem.get(), in, len, static_cast<off_t>(addr));
  if (n < 0)
    return errno_failure("write the caller's memory");
  if (static_cast<std::size_t>(n) != len)
    return errno_failure("write the caller's memory", EFAULT);
  return {};
}

} // namespace castellan::mediation
