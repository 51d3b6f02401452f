/// @file cgroup_subtree.cpp
/// See cgroup_subtree.hpp.

#include "platform/linux/cgroup_subtree.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <set>
#include <sstream>
#include <thread>

#include "ipc/unique_fd.hpp"
#include "platform/linux/file_io.hpp"

namespace castellan::platform {

namespace {

/// The directory below every own cgroup that holds the supervisors' subtrees.
constexpr const char* subtree_parent = "castellan";

using clock_type = std::chrono::steady_clock;

/// A decimal number without sign or leading zero (as std::to_string writes it).
std::optional<uint64_t> strict_decimal(const std::string& text) {
  if (text.empty() || text.size() > 20 || (text.size() > 1 && text.front() == '0'))
    return std::nullopt;
  if (!std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return std::nullopt;
  auto v = parse_u64(text);
  if (!v || std::to_string(*v) != text)
    return std::nullopt;
  return v;
}

/// The distinct own directories of a layout (co-mounted v1 controllers and
/// all of v2 share one).
std::vector<std::string> own_directories(const cgroup_layout& layout) {
  std::vector<std::string> out;
  for (const auto& c : layout.controllers())
    if (std::find(out.begin(), out.end(), c.own_dir) == out.end())
      out.push_back(c.own_dir);
  return out;
}

/// The names of the subdirectories of `dir` (none when it does not exist).
std::vector<std::string> subdirectories(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != ".." && e->d_type == DT_DIR)
      out.push_back(n);
  }
  ::closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

/// `dir` and every cgroup directory below it, parents before children.
void collect_tree(const std::string& dir, std::vector<std::string>& out) {
  out.push_back(dir);
  for (const auto& n : subdirectories(dir))
    collect_tree(dir + "/" + n, out);
}

std::vector<pid_t> listed_pids(const std::string& dir) {
  std::vector<pid_t> out;
  auto text = read_text_file(dir + "/cgroup.procs", 4 << 20);
  if (!text)
    return out;
  std::istringstream in(*text);
  for (std::string line; std::getline(in, line);)
    if (auto v = parse_u64(line); v && *v > 0 && *v <= INT32_MAX)
      out.push_back(static_cast<pid_t>(*v));
  return out;
}

/// Kills every task in the cgroups of `tree` until they are all empty or
/// `deadline` passes; returns how many pids were signalled. A pid is
/// signalled through a pidfd opened first, and only if it is still listed in
/// the cgroup after that: a pid that exited and was handed to an unrelated
/// process before the pidfd was opened is not listed there any more.
outcome<std::size_t> kill_tree_tasks(const std::vector<std::string>& tree,
                                     clock_type::time_point deadline) {
  // A task frozen by a v1 freezer acts on SIGKILL only once thawed.
  for (const auto& dir : tree)
    if (path_exists(dir + "/freezer.state"))
      (void)write_text_file(dir + "/freezer.state", "THAWED");
  std::set<pid_t> signalled;
  for (;;) {
    bool any = false;
    for (const auto& dir : tree) {
      if (path_exists(dir + "/cgroup.kill"))
        (void)write_text_file(dir + "/cgroup.kill", "1");
      const auto first = listed_pids(dir);
      if (first.empty())
        continue;
      any = true;
      for (pid_t pid : first) {
        unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
        if (!pidfd)
          continue; // gone already
        const auto again = listed_pids(dir);
        if (std::find(again.begin(), again.end(), pid) == again.end())
          continue;
        if (::syscall(SYS_pidfd_send_signal, pidfd.get(), SIGKILL, nullptr, 0) == 0)
          signalled.insert(pid);
      }
    }
    if (!any)
      return signalled.size();
    if (clock_type::now() >= deadline)
      return logic_failure("cgroup reclaim: tasks still alive below " +
                           (tree.empty() ? std::string("?") : tree.front()) + " after SIGKILL");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

/// Removes the directories of `tree` (parents listed first), children first,
/// retrying while killed tasks drain. ENOENT counts as removed.
outcome<void> remove_tree(const std::vector<std::string>& tree, clock_type::time_point deadline) {
  for (auto it = tree.rbegin(); it != tree.rend(); ++it) {
    for (;;) {
      if (::rmdir(it->c_str()) == 0 || errno == ENOENT)
        break;
      if (errno != EBUSY || clock_type::now() >= deadline)
        return errno_failure("cgroup reclaim: rmdir " + *it);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
  }
  return {};
}

/// Kills what is left in the subtrees `dirs` (one per hierarchy, and
/// below) and removes them. Every hierarchy is thawed and killed before any
/// is removed: a task frozen in the freezer hierarchy is listed in the
/// others too.
outcome<std::size_t> clear_and_remove(const std::vector<std::string>& dirs,
                                      clock_type::time_point deadline) {
  std::vector<std::string> all;
  for (const auto& d : dirs)
    collect_tree(d, all);
  auto killed = kill_tree_tasks(all, deadline);
  if (!killed)
    return killed.error();
  for (auto it = dirs.rbegin(); it != dirs.rend(); ++it) {
    std::vector<std::string> tree;
    collect_tree(*it, tree);
    if (auto r = remove_tree(tree, deadline); !r)
      return r.error();
  }
  return killed;
}

/// True when /proc is this process's own pid namespace's: /proc/self names
/// our pid and its ns/pid is ours. Otherwise a pid read there is someone
/// else's and nothing may be concluded from it.
bool proc_is_ours(const supervisor_id& self) {
  char buf[32];
  const ssize_t n = ::readlink("/proc/self", buf, sizeof buf - 1);
  if (n <= 0)
    return false;
  if (std::string(buf, static_cast<std::size_t>(n)) != std::to_string(::getpid()))
    return false;
  struct stat st;
  return ::stat("/proc/self/ns/pid", &st) == 0 && st.st_ino == self.pid_ns &&
         self.pid == ::getpid();
}

} // namespace

std::string supervisor_id::name() const {
  return std::to_string(pid) + "-" + std::to_string(start_time) + "-" + std::to_string(pid_ns);
}

std::optional<supervisor_id> supervisor_id::parse(const std::string& name) {
  const auto a = name.find('-');
  const auto b = a == std::string::npos ? a : name.find('-', a + 1);
  if (b == std::string::npos || name.find('-', b + 1) != std::string::npos)
    return std::nullopt;
  auto pid = strict_decimal(name.substr(0, a));
  auto start = strict_decimal(name.substr(a + 1, b - a - 1));
  auto ns = strict_decimal(name.substr(b + 1));
  if (!pid || !start || !ns || *pid == 0 || *pid > INT32_MAX)
    return std::nullopt;
  supervisor_id id;
  id.pid = static_cast<pid_t>(*pid);
  id.start_time = *start;
  id.pid_ns = *ns;
  return id;
}

outcome<std::optional<uint64_t>> process_start_time(pid_t pid) {
  const std::string path = "/proc/" + std::to_string(pid) + "/stat";
  auto text = read_text_file(path, 4096);
  if (!text) {
    if (text.error().code == ENOENT || text.error().code == ESRCH)
      return std::optional<uint64_t>{};
    return text.error();
  }
  // "pid (comm) state ppid …": comm may hold spaces and parentheses; the
  // fields after the last ')' start at field 3.
  const auto close = text->rfind(')');
  if (close == std::string::npos)
    return logic_failure("cgroup: malformed " + path);
  std::istringstream in(text->substr(close + 1));
  std::string field;
  for (int i = 3; i <= 22; ++i)
    if (!(in >> field))
      return logic_failure("cgroup: " + path + " has no start time");
  auto v = parse_u64(field);
  if (!v)
    return logic_failure("cgroup: " + path + ": start time '" + field + "' is not a number");
  return std::optional<uint64_t>{*v};
}

outcome<supervisor_id> supervisor_id::self() {
  supervisor_id id;
  id.pid = ::getpid();
  auto start = process_start_time(id.pid);
  if (!start)
    return start.error();
  if (!*start)
    return logic_failure("cgroup: /proc does not show this process (pid " +
                         std::to_string(id.pid) + "): is /proc another pid namespace's?");
  id.start_time = **start;
  struct stat st;
  if (::stat("/proc/self/ns/pid", &st) != 0)
    return errno_failure("cgroup: stat /proc/self/ns/pid");
  id.pid_ns = st.st_ino;
  return id;
}

outcome<cgroup_reclaim_report> reclaim_dead_subtrees(const cgroup_layout& layout,
                                                     const supervisor_id& self,
                                                     std::chrono::milliseconds timeout) {
  cgroup_reclaim_report report;
  if (!proc_is_ours(self))
    return logic_failure("cgroup reclaim: /proc is not this process's pid namespace's; "
                         "nothing can be told about the pids in subtree names");
  const auto deadline = clock_type::now() + timeout;
  const auto owns = own_directories(layout);
  std::set<std::string> names;
  for (const auto& own : owns)
    for (const auto& n : subdirectories(own + "/" + subtree_parent))
      names.insert(n);
  for (const auto& n : names) {
    const auto id = supervisor_id::parse(n);
    if (!id) {
      report.foreign.push_back(n + " (not a supervisor id)");
      continue;
    }
    if (id->pid == self.pid && id->start_time == self.start_time && id->pid_ns == self.pid_ns)
      continue;
    if (id->pid_ns != self.pid_ns) {
      report.foreign.push_back(n + " (another pid namespace)");
      continue;
    }
    auto start = process_start_time(id->pid);
    if (!start) {
      // Cannot tell: it may be alive.
      report.failed.push_back(n + ": " + start.error().describe());
      continue;
    }
    if (*start && **start == id->start_time) {
      report.live.push_back(n);
      continue;
    }
    std::vector<std::string> dirs;
    for (const auto& own : owns)
      dirs.push_back(own + "/" + subtree_parent + "/" + n);
    auto done = clear_and_remove(dirs, deadline);
    if (done) {
      report.tasks_killed += *done;
      report.reclaimed.push_back(n);
    } else {
      report.failed.push_back(n + ": " + done.error().describe());
    }
  }
  return report;
}

outcome<cgroup_subtree> cgroup_subtree::create(const cgroup_layout& layout,
                                               const supervisor_id& id) {
  cgroup_subtree t;
  t.name_ = id.name();
  t.owner_ = ::getpid();
  const auto owns = own_directories(layout);
  if (owns.empty())
    return logic_failure("cgroup: no usable controller (memory, pids, cpu) on this system");
  // v2: the controllers must be enabled for the children at every level
  // above the worker cgroups (worker_cgroup::create does the last level).
  std::string v2_enable;
  for (const auto& c : layout.controllers())
    if (c.version == cgroup_version::v2)
      v2_enable += (v2_enable.empty() ? "+" : " +") + c.name;
  const std::string& v2 = layout.v2_own_dir();
  auto enable = [&](const std::string& dir) -> outcome<void> {
    const bool on_v2 = !v2.empty() && (dir == v2 || dir.rfind(v2 + "/", 0) == 0);
    if (v2_enable.empty() || !on_v2)
      return {};
    return write_text_file(dir + "/cgroup.subtree_control", v2_enable);
  };
  for (const auto& own : owns) {
    const std::string parent = own + "/" + subtree_parent;
    const std::string dir = parent + "/" + t.name_;
    if (auto r = enable(own); !r)
      return r.error().wrap("cgroup: enabling controllers below " + own);
    // Another supervisor's remove() may take an empty parent away between
    // our two mkdirs: make it again.
    bool made = false;
    for (int attempt = 0; attempt < 8 && !made; ++attempt) {
      if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST)
        return errno_failure("cgroup: mkdir " + parent);
      if (auto r = enable(parent); !r && r.error().code != ENOENT)
        return r.error().wrap("cgroup: enabling controllers below " + parent);
      if (::mkdir(dir.c_str(), 0755) == 0) {
        made = true;
      } else if (errno != ENOENT) {
        // EEXIST included: never adopt a subtree this process did not make.
        const failure f = errno_failure("cgroup: mkdir " + dir);
        (void)t.remove();
        return f;
      }
    }
    if (!made)
      return logic_failure("cgroup: " + parent + " keeps disappearing");
    t.parents_.push_back(parent);
    t.dirs_.push_back(dir);
  }
  t.below_ = layout.below(std::string(subtree_parent) + "/" + t.name_);
  return t;
}

cgroup_subtree::cgroup_subtree(cgroup_subtree&& other) noexcept
  : below_(std::move(other.below_)),
    name_(std::move(other.name_)),
    dirs_(std::move(other.dirs_)),
    parents_(std::move(other.parents_)),
    owner_(std::exchange(other.owner_, 0)) {}

cgroup_subtree::~cgroup_subtree() {
  if (owner_ != 0 && owner_ == ::getpid())
    (void)remove();
}

outcome<void> cgroup_subtree::remove(std::chrono::milliseconds timeout) {
  auto done = clear_and_remove(dirs_, clock_type::now() + timeout);
  for (const auto& p : parents_)
    ::rmdir(p.c_str()); // EBUSY/ENOTEMPTY: another supervisor's subtree is there
  if (!done)
    return done.error();
  dirs_.clear();
  parents_.clear();
  owner_ = 0;
  return {};
}

} // namespace castellan::platform
