#include "platform/linux/process_memory.hpp"

#include <fcntl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace castellan::platform {

namespace {

constexpr uint64_t page_size = 4096; // the smallest page: reads never cross one needlessly

} // namespace

ssize_t process_memory::read_some(uint64_t addr, void* out, std::size_t len) noexcept {
  if (len == 0)
    return 0;
  if (addr + len < addr) // wraps around the address space
    return -EFAULT;
  if (!use_proc_mem_) {
    iovec local{out, len};
    iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), len};
    const ssize_t n = ::process_vm_readv(pid_, &local, 1, &remote, 1, 0);
    if (n >= 0)
      return n;
    if (errno != ENOSYS && errno != EPERM)
      return -errno;
    use_proc_mem_ = true;
  }
  const int fd = borrowed_mem_ >= 0 ? borrowed_mem_ : mem_.get();
  if (fd < 0) {
    const std::string path = "/proc/" + std::to_string(pid_) + "/mem";
    mem_.reset(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!mem_)
      return -errno;
  }
  if (addr > static_cast<uint64_t>(INT64_MAX))
    return -EFAULT;
  const ssize_t n = ::pread(fd >= 0 ? fd : mem_.get(), out, len, static_cast<off_t>(addr));
  return n >= 0 ? n : -errno;
}

outcome<void> process_memory::read(uint64_t addr, void* out, std::size_t len) noexcept {
  auto* dst = static_cast<char*>(out);
  std::size_t done = 0;
  while (done < len) {
    const ssize_t n = read_some(addr + done, dst + done, len - done);
    if (n < 0)
      return errno_failure("read memory of pid " + std::to_string(pid_), static_cast<int>(-n));
    if (n == 0)
      return errno_failure("read memory of pid " + std::to_string(pid_), EFAULT);
    done += static_cast<std::size_t>(n);
  }
  return {};
}

outcome<void> process_memory::write(uint64_t addr, const void* in, std::size_t len) noexcept {
  if (addr + len < addr)
    return errno_failure("write memory of pid " + std::to_string(pid_), EFAULT);
  iovec local{const_cast<void*>(in), len};
  iovec remote{reinterpret_cast<void*>(static_cast<uintptr_t>(addr)), len};
  ssize_t n = ::process_vm_writev(pid_, &local, 1, &remote, 1, 0);
  if (n < 0 && (errno == ENOSYS || errno == EPERM)) {
    const std::string path = "/proc/" + std::to_string(pid_) + "/mem";
    unique_fd mem(::open(path.c_str(), O_WRONLY | O_CLOEXEC));
    if (!mem || addr > static_cast<uint64_t>(INT64_MAX))
      return errno_failure("write memory of pid " + std::to_string(pid_), mem ? EFAULT : errno);
    n = ::pwrite(mem.get(), in, len, static_cast<off_t>(addr));
  }
  if (n < 0)
    return errno_failure("write memory of pid " + std::to_string(pid_));
  if (static_cast<std::size_t>(n) != len)
    return errno_failure("write memory of pid " + std::to_string(pid_), EFAULT);
  return {};
}

outcome<std::string> process_memory::read_string(uint64_t addr, std::size_t max_len) {
  std::string out;
  char chunk[page_size];
  while (out.size() <= max_len) {
    // Up to the end of the page: the next one may be unmapped, and the
    // string may well end before it.
    const uint64_t to_page_end = page_size - (addr % page_size);
    const std::size_t want =
        static_cast<std::size_t>(std::min<uint64_t>(to_page_end, max_len + 1 - out.size()));
    const ssize_t n = read_some(addr, chunk, want);
    if (n < 0)
      return errno_failure("read string of pid " + std::to_string(pid_), static_cast<int>(-n));
    if (n == 0)
      return errno_failure("read string of pid " + std::to_string(pid_), EFAULT);
    const auto* nul =
        static_cast<const char*>(std::memchr(chunk, '\0', static_cast<std::size_t>(n)));
    if (nul != nullptr) {
      out.append(chunk, static_cast<std::size_t>(nul - chunk));
      if (out.size() > max_len)
        break;
      return out;
    }
    out.append(chunk, static_cast<std::size_t>(n));
    addr += static_cast<uint64_t>(n);
  }
  return errno_failure("read string of pid " + std::to_string(pid_) + ": longer than " +
                           std::to_string(max_len) + " bytes",
                       ENAMETOOLONG);
}

} // namespace castellan::platform
