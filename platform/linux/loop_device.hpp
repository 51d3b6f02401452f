#pragma once

/// @file loop_device.hpp
/// A block device over a regular file, through the loop driver directly
/// (/dev/loop-control and the LOOP_* ioctls, no losetup). Devices are
/// attached with LO_FLAGS_AUTOCLEAR: the kernel detaches one when its last
/// user goes away (the handle below, then a mount of its file system), so a
/// process that dies, even by SIGKILL, leaks no device once its mounts are
/// gone. Needs CAP_SYS_ADMIN in the initial user namespace.

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// An open loop device: while the handle lives the device stays attached.
class loop_device {
public:
  /// Attaches `backing_fd` (a regular file, opened read-write) to a free
  /// loop device: LOOP_CTL_GET_FREE, then LOOP_CONFIGURE with
  /// LO_FLAGS_AUTOCLEAR, retried when another process takes the same device
  /// first. `what` names the file in errors.
  static outcome<loop_device> attach(int backing_fd, const std::string& what);

  /// The attached loop device whose backing file is the file of `backing_fd`
  /// (same device and inode), held open so that it cannot be detached and
  /// reused meanwhile; nothing when none is.
  static outcome<std::optional<loop_device>> find_backed_by(int backing_fd);

  /// The attached loop device whose device number is `rdev`, held open and
  /// checked to be backed by the file of `backing_fd`; nothing when `rdev`
  /// is no loop device or is backed by another file.
  static outcome<std::optional<loop_device>> open_if_backed_by(dev_t rdev, int backing_fd);

  int fd() const noexcept { return fd_.get(); }
  unsigned number() const noexcept { return number_; }
  dev_t rdev() const noexcept { return rdev_; }
  /// "/dev/loop7", for messages.
  std::string path() const;
  /// "/proc/self/fd/<fd>": names this very device for mount(2) without a
  /// lookup in /dev that could meanwhile lead elsewhere.
  std::string fd_path() const;

private:
  loop_device(unique_fd fd, unsigned number, dev_t rdev)
      : fd_(std::move(fd)), number_(number), rdev_(rdev) {}

  unique_fd fd_;
  unsigned number_ = 0;
  dev_t rdev_ = 0;
};

} // namespace castellan::platform
