#include "support/run_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include <boost/test/unit_test.hpp>

namespace castellan::test {

process_result run_process(const std::vector<std::string>& argv, const std::string& input,
                           int timeout_s, const std::function<void(pid_t)>& while_running) {
  int in[2], out[2], err[2];
  BOOST_REQUIRE(::pipe2(in, O_CLOEXEC) == 0 && ::pipe2(out, O_CLOEXEC) == 0 &&
                ::pipe2(err, O_CLOEXEC) == 0);
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  auto start = std::chrono::steady_clock::now();
  pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::dup2(in[0], 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  ::close(err[1]);
  // Write stdin fully (inputs in tests are small), then close it.
  if (!input.empty()) {
    ssize_t n = ::write(in[1], input.data(), input.size());
    (void)n;
  }
  ::close(in[1]);
  if (while_running)
    while_running(pid);
  process_result r;
  pollfd fds[2] = {{out[0], POLLIN, 0}, {err[0], POLLIN, 0}};
  int open_fds = 2;
  const auto deadline = start + std::chrono::seconds(timeout_s);
  while (open_fds > 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                  deadline - std::chrono::steady_clock::now())
                  .count();
    if (left <= 0 || ::poll(fds, 2, static_cast<int>(left)) == 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
      BOOST_FAIL("process timed out after " << timeout_s << " s: " << argv[0]);
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
        continue;
      char buf[65536];
      ssize_t n = ::read(fds[i].fd, buf, sizeof buf);
      if (n <= 0) {
        ::close(fds[i].fd);
        fds[i].fd = -1;
        --open_fds;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<std::size_t>(n));
      }
    }
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

} // namespace castellan::test
