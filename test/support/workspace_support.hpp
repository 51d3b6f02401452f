#pragma once

/// @file workspace_support.hpp
/// For tests that make real workspaces (loop devices, ext4 mounts): whether
/// the kernel can, and a sweeper that leaves no mount and no loop device of
/// a test directory behind, whatever the test did.

#include <dirent.h>
#include <sys/mount.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "platform/linux/mount_table.hpp"

namespace castellan::test {

/// Why this kernel cannot run workspaces (no loop driver, no ext4); nothing
/// when it can.
inline std::optional<std::string> workspace_kernel_lacks() {
  if (::access("/dev/loop-control", F_OK) != 0)
    return std::string("no /dev/loop-control: the kernel has no loop driver");
  std::ifstream fs("/proc/filesystems");
  std::string line;
  while (std::getline(fs, line))
    if (line.size() >= 4 && line.compare(line.size() - 4, 4, "ext4") == 0)
      return std::nullopt;
  return std::string("ext4 is not in /proc/filesystems");
}

/// The mount points at or below `dir`.
inline std::vector<std::string> mounts_below(const std::string& dir) {
  std::vector<std::string> out;
  if (auto m = platform::mounts_at_or_below(dir))
    for (const auto& e : *m)
      out.push_back(e.mount_point);
  return out;
}

/// The loop devices whose backing file lies below `dir` ("loop3", …).
inline std::vector<std::string> loops_below(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir("/sys/block");
  if (d == nullptr)
    return out;
  while (const dirent* e = ::readdir(d)) {
    if (std::strncmp(e->d_name, "loop", 4) != 0)
      continue;
    std::ifstream f(std::string("/sys/block/") + e->d_name + "/loop/backing_file");
    std::string backing;
    if (std::getline(f, backing) && backing.compare(0, dir.size() + 1, dir + "/") == 0)
      out.push_back(e->d_name);
  }
  ::closedir(d);
  return out;
}

/// Waits (up to 5 s) until no mount and no loop device of `dir` is left:
/// auto-clear detaches a device once its file system is released, which
/// the kernel may finish just after the unmount returns.
inline bool nothing_left_below(const std::string& dir) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (mounts_below(dir).empty() && loops_below(dir).empty())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

/// On destruction, detaches every mount at or below `dir` (deepest first),
/// so that a failed test leaves nothing mounted and its temporary directory
/// can be removed; auto-clear then releases the loop devices.
struct mount_sweeper {
  std::string dir;
  explicit mount_sweeper(std::string d) : dir(std::move(d)) {}
  ~mount_sweeper() {
    for (int round = 0; round < 8; ++round) {
      auto points = mounts_below(dir);
      if (points.empty())
        break;
      std::sort(points.begin(), points.end(),
                [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
      for (const auto& p : points)
        ::umount2(p.c_str(), MNT_DETACH | UMOUNT_NOFOLLOW);
    }
    nothing_left_below(dir);
  }
};

} // namespace castellan::test
