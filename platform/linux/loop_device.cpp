#include "platform/linux/loop_device.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <linux/loop.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace castellan::platform {

namespace {

constexpr int attach_attempts = 16;

/// Why a loop operation was refused with EPERM/EACCES: what it needs.
failure explain(failure f) {
  if (f.code == EPERM || f.code == EACCES)
    f.message += " (loop devices need CAP_SYS_ADMIN in the initial user namespace: run as root)";
  return f;
}

/// Same device and inode as the file of `backing_fd`.
bool backed_by(int loop_fd, const struct stat& backing) noexcept {
  loop_info64 info{};
  if (::ioctl(loop_fd, LOOP_GET_STATUS64, &info) != 0)
    return false; // ENXIO: not attached
  return info.lo_device == static_cast<uint64_t>(backing.st_dev) &&
         info.lo_inode == static_cast<uint64_t>(backing.st_ino);
}

/// The numbers of the loop devices the kernel has (/sys/block/loopN).
outcome<std::vector<unsigned>> loop_numbers() {
  DIR* dir = ::opendir("/sys/block");
  if (dir == nullptr)
    return errno_failure("opendir /sys/block");
  std::vector<unsigned> out;
  while (const dirent* e = ::readdir(dir)) {
    if (std::strncmp(e->d_name, "loop", 4) != 0)
      continue;
    const char* digits = e->d_name + 4;
    if (*digits == '\0')
      continue;
    unsigned n = 0;
    bool ok = true;
    for (const char* c = digits; *c != '\0'; ++c) {
      if (*c < '0' || *c > '9' || n > 100000000u) {
        ok = false;
        break;
      }
      n = n * 10 + static_cast<unsigned>(*c - '0');
    }
    if (ok)
      out.push_back(n);
  }
  ::closedir(dir);
  return out;
}

std::string device_path(unsigned number) {
  return "/dev/loop" + std::to_string(number);
}

} // namespace

std::string loop_device::path() const {
  return device_path(number_);
}

std::string loop_device::fd_path() const {
  return "/proc/self/fd/" + std::to_string(fd_.get());
}

outcome<loop_device> loop_device::attach(int backing_fd, const std::string& what) {
  struct stat backing;
  if (::fstat(backing_fd, &backing) != 0)
    return errno_failure("loop: fstat " + what);
  if (!S_ISREG(backing.st_mode))
    return logic_failure("loop: " + what + " is not a regular file");
  unique_fd control(::open("/dev/loop-control", O_RDWR | O_CLOEXEC));
  if (!control)
    return explain(errno_failure("loop: open /dev/loop-control"));
  for (int attempt = 0; attempt < attach_attempts; ++attempt) {
    const int number = ::ioctl(control.get(), LOOP_CTL_GET_FREE);
    if (number < 0)
      return explain(errno_failure("loop: LOOP_CTL_GET_FREE"));
    const auto n = static_cast<unsigned>(number);
    unique_fd dev(::open(device_path(n).c_str(), O_RDWR | O_CLOEXEC));
    if (!dev) {
      if (errno == ENOENT || errno == ENXIO)
        continue; // removed meanwhile
      return explain(errno_failure("loop: open " + device_path(n)));
    }
    loop_config config{};
    config.fd = static_cast<uint32_t>(backing_fd);
    config.info.lo_flags = LO_FLAGS_AUTOCLEAR;
    std::strncpy(reinterpret_cast<char*>(config.info.lo_file_name), what.c_str(),
                 LO_NAME_SIZE - 1);
    if (::ioctl(dev.get(), LOOP_CONFIGURE, &config) != 0) {
      if (errno == EBUSY)
        continue; // another process attached it first: ask for the next free one
      return explain(errno_failure("loop: LOOP_CONFIGURE " + device_path(n) + " with " + what));
    }
    struct stat st;
    if (::fstat(dev.get(), &st) != 0)
      return errno_failure("loop: fstat " + device_path(n));
    return loop_device(std::move(dev), n, st.st_rdev);
  }
  return logic_failure("loop: no free loop device for " + what + " after " +
                       std::to_string(attach_attempts) + " attempts (others kept taking them)");
}

namespace {

/// The attached loop device backed by `backing` (and, when `rdev` is not 0,
/// with that device number), opened read-only.
outcome<std::optional<std::pair<unique_fd, std::pair<unsigned, dev_t>>>>
find_loop(const struct stat& backing, dev_t rdev) {
  auto numbers = loop_numbers();
  if (!numbers)
    return numbers.error().wrap("loop");
  for (unsigned n : *numbers) {
    unique_fd dev(::open(device_path(n).c_str(), O_RDONLY | O_CLOEXEC));
    if (!dev) {
      if (errno == ENOENT || errno == ENXIO)
        continue;
      return explain(errno_failure("loop: open " + device_path(n)));
    }
    struct stat st;
    if (::fstat(dev.get(), &st) != 0 || !S_ISBLK(st.st_mode))
      continue;
    if (rdev != 0 && st.st_rdev != rdev)
      continue;
    if (backed_by(dev.get(), backing))
      return std::optional<std::pair<unique_fd, std::pair<unsigned, dev_t>>>(
        std::make_pair(std::move(dev), std::make_pair(n, st.st_rdev)));
  }
  return std::optional<std::pair<unique_fd, std::pair<unsigned, dev_t>>>();
}

} // namespace

outcome<std::optional<loop_device>> loop_device::find_backed_by(int backing_fd) {
  struct stat backing;
  if (::fstat(backing_fd, &backing) != 0)
    return errno_failure("loop: fstat of the backing file");
  auto found = find_loop(backing, 0);
  if (!found)
    return found.error();
  if (!*found)
    return std::optional<loop_device>();
  auto& [fd, id] = **found;
  return std::optional<loop_device>(loop_device(std::move(fd), id.first, id.second));
}

outcome<std::optional<loop_device>> loop_device::open_if_backed_by(dev_t rdev, int backing_fd) {
  struct stat backing;
  if (::fstat(backing_fd, &backing) != 0)
    return errno_failure("loop: fstat of the backing file");
  if (rdev == 0)
    return std::optional<loop_device>();
  auto found = find_loop(backing, rdev);
  if (!found)
    return found.error();
  if (!*found)
    return std::optional<loop_device>();
  auto& [fd, id] = **found;
  return std::optional<loop_device>(loop_device(std::move(fd), id.first, id.second));
}

} // namespace castellan::platform
