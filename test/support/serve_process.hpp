#pragma once

/// @file serve_process.hpp
/// A real `castellan serve` for the tests that talk to it: started on a unix
/// socket in a fresh directory, its stdout and stderr on pipes, killed and
/// cleaned up when it goes.

#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "support/build_paths.hpp"
#include "support/http_client.hpp"

namespace castellan::test {

/// A running `castellan serve` with its stdout on a pipe.
struct serve_process {
  std::string dir;
  std::string socket_path;
  pid_t pid = -1;
  int out = -1;
  int exit_status = -1;

  int err = -1;

  explicit serve_process(std::vector<std::string> extra = {}, std::string socket = {}) {
    char tmpl[] = "/tmp/castellan-serve-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir = tmpl;
    socket_path = socket.empty() ? dir + "/castellan.sock" : socket;
    std::vector<std::string> args = {castellan_cli(), "serve", "--listen",
                                     "unix:" + socket_path};
    // A config file describes the pools itself.
    if (std::find(extra.begin(), extra.end(), "--config") == extra.end())
      args.insert(args.end(), {"--pool-size", "2"});
    args.insert(args.end(), extra.begin(), extra.end());
    int fds[2];
    BOOST_REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
    int efds[2];
    BOOST_REQUIRE(::pipe2(efds, O_CLOEXEC) == 0);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::dup2(fds[1], 1);
      ::dup2(efds[1], 2);
      std::vector<char*> argv;
      for (auto& a : args)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
    ::close(fds[1]);
    ::close(efds[1]);
    out = fds[0];
    err = efds[0];
  }

  /// Reads its stderr until `text` appears (30 s safety net); what it read.
  std::string wait_for_stderr(const std::string& text) {
    std::string seen;
    char buf[512];
    while (seen.find(text) == std::string::npos) {
      pollfd p{err, POLLIN, 0};
      BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "no '" << text << "' on stderr: " << seen);
      ssize_t n = ::read(err, buf, sizeof(buf));
      BOOST_REQUIRE_MESSAGE(n > 0, "stderr closed before '" << text << "': " << seen);
      seen.append(buf, static_cast<std::size_t>(n));
    }
    return seen;
  }

  /// Reads stderr until a whole line holding `text` has arrived; returns
  /// what was read (30 s safety net). A single read often brings the line and
  /// its end at once, so waiting for the "\n" separately could wait forever.
  std::string wait_for_stderr_line(const std::string& text) {
    std::string seen = wait_for_stderr(text);
    while (seen.find('\n', seen.find(text)) == std::string::npos)
      seen += wait_for_stderr("\n");
    return seen;
  }

  /// The first line it prints (30 s safety net).
  std::string first_line() {
    std::string line;
    char c;
    while (line.empty() || line.back() != '\n') {
      pollfd p{out, POLLIN, 0};
      BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "castellan serve printed nothing");
      if (::read(out, &c, 1) != 1)
        break;
      line += c;
    }
    return line;
  }

  /// Waits for the exit (60 s safety net, then SIGKILL and fail).
  int wait() {
    for (int i = 0; i < 6000 && exit_status < 0; ++i) {
      int status = 0;
      if (::waitpid(pid, &status, WNOHANG) == pid)
        exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (exit_status < 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      BOOST_FAIL("castellan serve did not exit within 60 s");
    }
    return exit_status;
  }

  ~serve_process() {
    if (exit_status < 0 && pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    if (out >= 0)
      ::close(out);
    if (err >= 0)
      ::close(err);
    std::system(("rm -rf '" + dir + "'").c_str());
  }
};

/// GET `target` until `done` holds (30 s safety net).
inline http_reply wait_until(const std::string& socket, const std::string& target,
                             const std::function<bool(const http_reply&)>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  http_client c(socket);
  for (;;) {
    auto r = c.get(target);
    if (done(r))
      return r;
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          "GET " << target << " never got there: " << r.body);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

} // namespace castellan::test
