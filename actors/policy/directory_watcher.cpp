#include "actors/policy/directory_watcher.hpp"

#include <fcntl.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/inotify.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <set>

#include "actors/policy/engine/policy_directory.hpp"

namespace castellan {

outcome<std::unique_ptr<directory_watcher>> directory_watcher::start(const std::string& dir,
                                                                     callback cb) {
  unique_fd in{::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  if (!in)
    return errno_failure("inotify_init1");
  // Content changes are complete at IN_CLOSE_WRITE; editors that write a
  // temporary file and rename it produce IN_MOVED_TO. IN_CREATE counts only
  // for symbolic links (a new regular file is still empty then, and would be
  // refused for nothing; a new link has no other event).
  const uint32_t mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | IN_DELETE_SELF |
                        IN_MOVE_SELF | IN_CREATE | IN_ONLYDIR;
  if (::inotify_add_watch(in.get(), dir.c_str(), mask) < 0)
    return errno_failure("inotify_add_watch " + dir);
  // To tell a new link from a new file: names are looked up in the watched
  // directory itself, even if its path is replaced meanwhile.
  unique_fd dir_fd{::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC)};
  if (!dir_fd)
    return errno_failure("open " + dir);
  unique_fd wake{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  if (!wake)
    return errno_failure("eventfd");
  std::unique_ptr<directory_watcher> w{
      new directory_watcher(std::move(in), std::move(dir_fd), std::move(wake), std::move(cb))};
  w->thread_ = std::thread{[p = w.get()] { p->run(); }};
  return w;
}

directory_watcher::directory_watcher(unique_fd inotify, unique_fd dir, unique_fd wake, callback cb)
    : inotify_(std::move(inotify)), dir_(std::move(dir)), wake_(std::move(wake)),
      cb_(std::move(cb)) {}

bool directory_watcher::is_symlink(const std::string& name) const {
  struct stat st {};
  return ::fstatat(dir_.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
         S_ISLNK(st.st_mode);
}

directory_watcher::~directory_watcher() {
  const uint64_t one = 1;
  // A full eventfd counter (impossible here) would fail with EAGAIN; the
  // thread is awake then anyway.
  [[maybe_unused]] const auto n = ::write(wake_.get(), &one, sizeof(one));
  if (thread_.joinable())
    thread_.join();
}

void directory_watcher::run() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
      return;
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    // One read can hold many events; report each file once per batch.
    std::set<std::string> changed;
    bool rescan = false;
    for (;;) {
      const ssize_t n = ::read(inotify_.get(), buf, sizeof(buf));
      if (n <= 0)
        break;
      for (size_t off = 0; off + sizeof(inotify_event) <= static_cast<size_t>(n);) {
        inotify_event ev;
        std::memcpy(&ev, buf + off, sizeof(ev));
        const size_t total = sizeof(inotify_event) + ev.len;
        if (off + total > static_cast<size_t>(n))
          break;
        if ((ev.mask & (IN_Q_OVERFLOW | IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
          rescan = true;
        } else if (ev.len > 0) {
          const char* name = buf + off + sizeof(inotify_event);
          const std::string file{name, ::strnlen(name, ev.len)};
          const bool created = (ev.mask & IN_CREATE) != 0;
          if (created && !is_symlink(file)) {
            // a new file (its IN_CLOSE_WRITE follows) or directory
          } else if (policy::is_policy_file_name(file)) {
            changed.insert(file);
          } else if (created || (ev.mask & IN_MOVED_TO) != 0) {
            // Another name linked or moved in may change what the policy
            // files' links resolve to: a Kubernetes ConfigMap volume swaps
            // its `..data` link to a new directory of files in one rename.
            rescan = true;
          }
        }
        off += total;
      }
    }
    if (rescan)
      cb_(std::string{});
    for (const auto& f : changed)
      cb_(f);
  }
}

} // namespace castellan
