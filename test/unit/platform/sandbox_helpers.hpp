#pragma once

/// @file sandbox_helpers.hpp
/// Small helpers for test bodies that run inside a sandbox child: directory
/// listings, running a program and capturing its output, errno checks.

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>
#include <string>
#include <vector>

namespace castellan::test {

inline std::set<std::string> list_dir(const std::string& path) {
  std::set<std::string> out;
  if (DIR* d = ::opendir(path.c_str())) {
    while (dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n != "." && n != "..")
        out.insert(n);
    }
    ::closedir(d);
  }
  return out;
}

inline std::string join(const std::set<std::string>& s) {
  std::string out;
  for (const auto& e : s)
    out += (out.empty() ? "" : " ") + e;
  return out;
}

struct program_result {
  int status = -1; ///< waitpid status
  std::string output; ///< stdout and stderr
};

/// fork + execve(argv) with stdout/stderr captured; waits at most 20 s.
inline program_result run_program(const std::vector<std::string>& args,
                                  const std::vector<std::string>& env = {"PATH=/usr/bin:/bin",
                                                                         "LANG=C.UTF-8"}) {
  program_result r;
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return r;
  std::vector<char*> argv, envp;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const auto& e : env)
    envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(p[1], 1);
    ::dup2(p[1], 2);
    ::execve(argv[0], argv.data(), envp.data());
    ::_exit(127);
  }
  ::close(p[1]);
  char buf[4096];
  for (;;) {
    pollfd pfd{p[0], POLLIN, 0};
    if (::poll(&pfd, 1, 20'000) != 1) {
      ::kill(pid, SIGKILL);
      break;
    }
    const ssize_t n = ::read(p[0], buf, sizeof buf);
    if (n <= 0)
      break;
    r.output.append(buf, static_cast<std::size_t>(n));
  }
  ::close(p[0]);
  ::waitpid(pid, &r.status, 0);
  return r;
}

/// "" if `rc` failed with `expected` errno, else a message.
inline std::string expect_errno(const char* what, long rc, int expected) {
  if (rc >= 0)
    return std::string(what) + ": succeeded, expected " + std::strerror(expected) + "\n";
  if (errno != expected)
    return std::string(what) + ": failed with " + std::strerror(errno) + ", expected " +
           std::strerror(expected) + "\n";
  return {};
}

inline std::string expect_ok(const char* what, long rc) {
  if (rc < 0)
    return std::string(what) + ": failed with " + std::strerror(errno) + "\n";
  return {};
}

} // namespace castellan::test
