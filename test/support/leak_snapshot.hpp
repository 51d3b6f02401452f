#pragma once

/// @file leak_snapshot.hpp
/// What this process holds of the kernel's objects — its fds, memfd
/// mappings, mount table, worker cgroups and child processes — taken before
/// and after a run, so that a test can say exactly what a pool left behind.

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace castellan::test {

struct leak_snapshot {
  /// "fd -> target" for every open fd of this process (the directory
  /// handle used to list them excluded).
  std::vector<std::string> fds;
  /// Lines of /proc/self/maps that map a memfd (the shared segments).
  std::size_t memfd_mappings = 0;
  /// Lines of /proc/self/mountinfo.
  std::size_t mounts = 0;
  /// Worker cgroups this process created ("castellan-…-<our pid>-…" in its
  /// cgroup subtree or right below its own cgroup, in every hierarchy).
  std::vector<std::string> cgroups;
  /// Processes whose parent is this process (zombies included).
  std::vector<pid_t> children;
  /// Resident set size of this process, in KiB.
  std::size_t rss_kib = 0;

  static leak_snapshot take();
};

/// What `after` holds that `before` did not, one readable line per item;
/// empty when nothing leaked. RSS is not compared (that is a threshold the
/// caller chooses).
std::vector<std::string> leaks_between(const leak_snapshot& before, const leak_snapshot& after);

} // namespace castellan::test
