#pragma once

/// @file child_process.hpp
/// Runs a test body in a child process (forked, or born sandboxed through
/// clone_sandboxed) with a deadline. The body returns "" on success, a
/// message starting with "SKIP: " when the running kernel lacks the feature
/// (exit 77), or a failure message (exit 1). Irreversible things (Landlock,
/// seccomp, pivot_root) happen only in the child.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include <boost/test/unit_test.hpp>

#include "ipc/unique_fd.hpp"
#include "platform/linux/namespaces.hpp"
#include "platform/linux/pidfd.hpp"
#include "platform/spawn_worker.hpp"
#include "support/skip.hpp"

namespace castellan::test {

constexpr int skip_code = 77;

struct child_result {
  bool timed_out = false;
  platform::exit_status status;
  std::string message;
};

namespace detail {

/// The child's side: run, report, _exit (no destructors, no Boost).
[[noreturn]] inline void finish_child(int report_fd, const std::function<std::string()>& body) {
  std::string msg;
  try {
    msg = body();
  } catch (const std::exception& e) {
    msg = std::string("exception: ") + e.what();
  } catch (...) {
    msg = "unknown exception";
  }
  const char* p = msg.data();
  std::size_t left = msg.size();
  while (left > 0) {
    const ssize_t n = ::write(report_fd, p, left);
    if (n <= 0)
      break;
    p += n;
    left -= static_cast<std::size_t>(n);
  }
  ::_exit(msg.empty() ? 0 : msg.rfind("SKIP: ", 0) == 0 ? skip_code : 1);
}

/// Collects the report and the exit status, killing the child at the deadline.
inline child_result collect(unique_fd report, int pidfd, std::chrono::seconds timeout) {
  child_result r;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  auto left_ms = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      deadline - std::chrono::steady_clock::now());
    return static_cast<int>(std::max<int64_t>(left.count(), 0));
  };
  char buf[4096];
  for (;;) {
    pollfd pfd{report.get(), POLLIN, 0};
    const int ready = ::poll(&pfd, 1, left_ms());
    if (ready < 0 && errno == EINTR)
      continue;
    if (ready <= 0) {
      r.timed_out = true;
      break;
    }
    const ssize_t n = ::read(report.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    r.message.append(buf, static_cast<std::size_t>(n));
  }
  if (!r.timed_out) {
    pollfd pfd{pidfd, POLLIN, 0};
    if (::poll(&pfd, 1, left_ms()) != 1)
      r.timed_out = true;
  }
  if (r.timed_out)
    ::syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, nullptr, 0);
  auto st = platform::pidfd_reap(pidfd);
  if (st)
    r.status = *st;
  return r;
}

} // namespace detail

/// fork() + body.
inline child_result run_forked(const std::function<std::string()>& body,
                               std::chrono::seconds timeout = std::chrono::seconds(60)) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return {false, {}, "pipe2 failed"};
  unique_fd rd(p[0]), wr(p[1]);
  const pid_t pid = ::fork();
  if (pid < 0)
    return {false, {}, "fork failed"};
  if (pid == 0) {
    rd.release();
    detail::finish_child(wr.get(), body);
  }
  wr.reset();
  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  return detail::collect(std::move(rd), pidfd.get(), timeout);
}

/// clone_sandboxed(options) + body: the body runs as the sandbox user, PID 1
/// of its pid namespace when options ask for one.
inline child_result run_sandboxed(const platform::sandbox_clone_options& options,
                                  const std::function<std::string()>& body,
                                  std::chrono::seconds timeout = std::chrono::seconds(60)) {
  int p[2];
  if (::pipe2(p, O_CLOEXEC) != 0)
    return {false, {}, "pipe2 failed"};
  unique_fd rd(p[0]), wr(p[1]);
  const int report_fd = wr.get();
  auto fn = [&](platform::sandbox_child& self) -> int {
    self.started();
    detail::finish_child(report_fd, body);
  };
  auto child = platform::clone_sandboxed(options, fn);
  if (!child)
    return {false, {}, "clone_sandboxed: " + child.error().describe()};
  wr.reset();
  return detail::collect(std::move(rd), child->pidfd.get(), timeout);
}

/// Every namespace, ids mapped the default way.
inline platform::sandbox_clone_options all_namespaces() {
  platform::sandbox_clone_options o;
  o.namespaces = {true, true, true, true, true, true, true};
  return o;
}

/// Checks a child_result: passes, skips (with the reason in the log) or fails.
inline void check(const child_result& r) {
  BOOST_REQUIRE_MESSAGE(!r.timed_out, "the test child timed out: " + r.message);
  if (!r.status.signaled && r.status.code == skip_code) {
    castellan::test::skip(r.message.rfind("SKIP: ", 0) == 0 ? r.message.substr(6) : r.message);
    return;
  }
  BOOST_TEST(!r.status.signaled, "test child " << r.status.describe() << ": " << r.message);
  BOOST_TEST(r.status.code == 0, "test child failed: " << r.message);
}

/// "errno N (text)" for messages.
inline std::string err_text(int err) {
  return std::to_string(err) + " (" + std::strerror(err) + ")";
}


/// Starts `spec` through spawn_worker with a pipe as its stdout (and stderr
/// when `with_stderr`), reads until EOF (10 s at most between reads) and
/// reaps it: (exit status, output).
inline std::pair<platform::exit_status, std::string> run_capturing(platform::worker_spec spec,
                                                                  bool with_stderr = false) {
  int p[2];
  BOOST_REQUIRE_EQUAL(::pipe2(p, O_CLOEXEC), 0);
  unique_fd rd(p[0]), wr(p[1]);
  spec.fds.push_back({wr.get(), 1});
  if (with_stderr)
    spec.fds.push_back({wr.get(), 2});
  auto child = platform::spawn_worker(spec);
  BOOST_REQUIRE_MESSAGE(child, (child ? "" : child.error().describe()));
  wr.reset();
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd pfd{rd.get(), POLLIN, 0};
    BOOST_REQUIRE_MESSAGE(::poll(&pfd, 1, 10'000) == 1, "child output timed out");
    ssize_t n = ::read(rd.get(), buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  auto st = platform::pidfd_reap(child->pidfd.get());
  BOOST_REQUIRE(st);
  return {*st, out};
}

} // namespace castellan::test
