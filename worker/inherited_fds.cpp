/// @file inherited_fds.cpp
/// Validation of the inherited wire fds and of the interpreter paths.

#include "worker/inherited_fds.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <string>

#include "ipc/segment.hpp"

namespace castellan::worker {

namespace {

outcome<void> check_open(const char* what, int fd) {
  if (::fcntl(fd, F_GETFD) < 0)
    return errno_failure(std::string(what) + " " + std::to_string(fd) + " is not open");
  return {};
}

outcome<void> check_eventfd(const char* what, int fd) {
  if (auto open = check_open(what, fd); !open)
    return open;
  // /proc names the anonymous inode; without /proc (an early sandbox stage)
  // the flag check below is all that can be said.
  char link[256] = {};
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
  if (n >= 0 && std::string(link, static_cast<std::size_t>(n)) != "anon_inode:[eventfd]")
    return logic_failure(std::string(what) + " " + std::to_string(fd) + " is '" +
                         std::string(link, static_cast<std::size_t>(n)) + "', not an eventfd");
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0)
    return errno_failure(std::string(what) + " " + std::to_string(fd) + ": F_GETFL");
  if ((flags & O_NONBLOCK) == 0)
    return logic_failure(std::string(what) + " " + std::to_string(fd) +
                         " is blocking; the wire needs EFD_NONBLOCK eventfds");
  return {};
}

} // namespace

outcome<void> check_inherited_fds(const options& opts) {
  if (auto open = check_open("--segment-fd", opts.segment_fd); !open)
    return open;
  // Attach a duplicate: the validation maps and unmaps it, and the original
  // stays untouched for the harness.
  unique_fd copy{::fcntl(opts.segment_fd, F_DUPFD_CLOEXEC, 3)};
  if (!copy)
    return errno_failure("--segment-fd " + std::to_string(opts.segment_fd) + ": dup");
  auto seg = ipc::segment::attach(std::move(copy));
  if (!seg)
    return seg.error().wrap("--segment-fd " + std::to_string(opts.segment_fd));
  if (auto r = check_eventfd("--to-worker-fd", opts.to_worker_fd); !r)
    return r;
  if (auto r = check_eventfd("--to-supervisor-fd", opts.to_supervisor_fd); !r)
    return r;
  return {};
}

outcome<void> check_status_fd(const options& opts) {
  if (opts.status_fd < 0)
    return {};
  const std::string what = "--status-fd " + std::to_string(opts.status_fd);
  struct stat st;
  if (::fstat(opts.status_fd, &st) != 0)
    return errno_failure(what + " is not open");
  const int flags = ::fcntl(opts.status_fd, F_GETFL);
  if (!S_ISFIFO(st.st_mode) || flags < 0 || (flags & O_ACCMODE) != O_WRONLY)
    return logic_failure(what + " is not the write end of a pipe");
  if (::fcntl(opts.status_fd, F_SETFD, FD_CLOEXEC) != 0)
    return errno_failure(what + ": F_SETFD");
  return {};
}

outcome<void> check_paths(const options& opts) {
  if (::access(opts.python.c_str(), X_OK) != 0)
    return errno_failure("--python " + opts.python);
  if (::access(opts.harness.c_str(), R_OK) != 0)
    return errno_failure("--harness " + opts.harness);
  return {};
}

} // namespace castellan::worker
