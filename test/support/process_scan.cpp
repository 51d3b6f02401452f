#include "support/process_scan.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace castellan::test {

namespace {

std::vector<std::string> numeric_entries(const std::string& dir) {
  std::vector<std::string> out;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr)
    return out;
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (!name.empty() && name.find_first_not_of("0123456789") == std::string::npos)
      out.push_back(name);
  }
  ::closedir(d);
  return out;
}

} // namespace

std::string unique_task_name(const char* prefix) {
  static std::atomic<unsigned> counter{0};
  std::string name = std::string(prefix) + std::to_string(::getpid() % 100000) + "x" +
                     std::to_string(counter++ % 1000);
  return name.substr(0, 15);
}

std::string python_set_task_name(const std::string& name) {
  return "import ctypes as _c\n_c.CDLL(None).prctl(15, b'" + name + "', 0, 0, 0)\ndel _c\n";
}

std::vector<pid_t> tasks_named(const std::string& name) {
  std::vector<pid_t> found;
  for (const auto& pid : numeric_entries("/proc")) {
    for (const auto& tid : numeric_entries("/proc/" + pid + "/task")) {
      std::ifstream in("/proc/" + pid + "/task/" + tid + "/comm");
      std::string comm;
      if (std::getline(in, comm) && comm == name)
        found.push_back(static_cast<pid_t>(std::atoi(tid.c_str())));
    }
  }
  return found;
}

std::vector<pid_t> wait_until_no_task_named(const std::string& name, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    auto left = tasks_named(name);
    if (left.empty() || std::chrono::steady_clock::now() >= deadline)
      return left;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

bool wait_until_task_in_syscall(const std::string& name, long nr, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (const pid_t tid : tasks_named(name)) {
      // "<nr> <args…>" while blocked in a call, "running" or "-1 …" otherwise.
      std::ifstream in("/proc/" + std::to_string(tid) + "/syscall");
      long current = -1;
      if (in >> current && current == nr)
        return true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

namespace {

/// The parent pid of `pid` from /proc, or -1.
pid_t parent_of(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line) || line.rfind(')') == std::string::npos)
    return -1;
  std::istringstream rest(line.substr(line.rfind(')') + 1));
  char state = 0;
  pid_t ppid = -1;
  rest >> state >> ppid;
  return ppid;
}

} // namespace

bool wait_until_harness_drained(const std::string& name, int timeout_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    for (const pid_t exec : tasks_named(name)) {
      const pid_t harness = parent_of(parent_of(exec));
      if (harness <= 0)
        continue;
      const int fd = ::open(("/proc/" + std::to_string(exec) + "/fd/1").c_str(),
                            O_RDONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0)
        continue;
      int unread = -1;
      const bool empty = ::ioctl(fd, FIONREAD, &unread) == 0 && unread == 0;
      ::close(fd);
      std::ifstream in("/proc/" + std::to_string(harness) + "/syscall");
      long nr = -1;
      if (empty && in >> nr && nr == SYS_poll)
        return true;
    }
    if (std::chrono::steady_clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace castellan::test
