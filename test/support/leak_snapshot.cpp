#include "support/leak_snapshot.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>

#include "platform/linux/cgroup_subtree.hpp"
#include "platform/linux/cgroups.hpp"

namespace castellan::test {

namespace {

std::vector<std::string> entries(const std::string& dir, bool numeric_only) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  const std::string own = std::to_string(::dirfd(d));
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name == "." || name == "..")
      continue;
    if (numeric_only && name.find_first_not_of("0123456789") != std::string::npos)
      continue;
    if (dir == "/proc/self/fd" && name == own)
      continue;
    out.push_back(name);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

std::size_t count_lines(const std::string& path, const std::string& containing = {}) {
  std::ifstream in(path);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);)
    n += containing.empty() || line.find(containing) != std::string::npos;
  return n;
}

/// The parent pid from /proc/<pid>/stat (the field after the command, which
/// may itself contain spaces and parentheses).
pid_t parent_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = stat.rfind(')');
  if (close == std::string::npos || close + 4 >= stat.size())
    return -1;
  // ") S <ppid> …"
  return static_cast<pid_t>(std::atoi(stat.c_str() + close + 4));
}

} // namespace

leak_snapshot leak_snapshot::take() {
  leak_snapshot s;
  for (const auto& fd : entries("/proc/self/fd", true)) {
    char target[4096];
    const auto n = ::readlink(("/proc/self/fd/" + fd).c_str(), target, sizeof target - 1);
    s.fds.push_back(fd + " -> " +
                    (n < 0 ? std::string("?") : std::string(target, static_cast<std::size_t>(n))));
  }
  s.memfd_mappings = count_lines("/proc/self/maps", "/memfd:");
  s.mounts = count_lines("/proc/self/mountinfo");
  const std::string marker = "-" + std::to_string(::getpid()) + "-";
  if (auto layout = platform::cgroup_layout::detect()) {
    std::set<std::string> dirs;
    for (const auto& c : layout->controllers())
      dirs.insert(c.own_dir);
    // Worker cgroups live in this process's subtree (cgroup_subtree.hpp);
    // tests that make their own cgroups make them right below the own ones.
    const auto self = platform::supervisor_id::self();
    for (const auto& own : dirs) {
      std::vector<std::string> places{own};
      if (self)
        places.push_back(own + "/castellan/" + self->name());
      for (const auto& dir : places)
        for (const auto& name : entries(dir, false))
          if (name.rfind("castellan", 0) == 0 && name.find(marker) != std::string::npos)
            s.cgroups.push_back(dir + "/" + name);
    }
  }
  const pid_t me = ::getpid();
  for (const auto& pid : entries("/proc", true))
    if (parent_of(pid) == me)
      s.children.push_back(static_cast<pid_t>(std::atoi(pid.c_str())));
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0)
      s.rss_kib = static_cast<std::size_t>(std::strtoull(line.c_str() + 6, nullptr, 10));
  return s;
}

std::vector<std::string> leaks_between(const leak_snapshot& before, const leak_snapshot& after) {
  std::vector<std::string> out;
  for (const auto& fd : after.fds)
    if (std::find(before.fds.begin(), before.fds.end(), fd) == before.fds.end())
      out.push_back("fd " + fd);
  if (after.memfd_mappings > before.memfd_mappings)
    out.push_back(std::to_string(after.memfd_mappings - before.memfd_mappings) +
                  " more memfd mapping(s)");
  if (after.mounts != before.mounts)
    out.push_back("mount table has " + std::to_string(after.mounts) + " entries, was " +
                  std::to_string(before.mounts));
  for (const auto& cg : after.cgroups)
    if (std::find(before.cgroups.begin(), before.cgroups.end(), cg) == before.cgroups.end())
      out.push_back("cgroup " + cg);
  for (auto pid : after.children)
    if (std::find(before.children.begin(), before.children.end(), pid) == before.children.end())
      out.push_back("child process " + std::to_string(pid));
  return out;
}

} // namespace castellan::test
