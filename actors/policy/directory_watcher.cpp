#include "actors/policy/directory_watcher.hpp"

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

namespace {

// Content changes are complete at IN_CLOSE_WRITE; editors that write a
// temporary file and rename it produce IN_MOVED_TO. IN_CREATE counts for
// links and hard links only (a new empty file is refused for nothing; its
// IN_CLOSE_WRITE follows).
constexpr uint32_t watch_mask = IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE |
                                IN_DELETE_SELF | IN_MOVE_SELF | IN_CREATE | IN_ONLYDIR;

} // namespace

class directory_watcher::loop {
public:
  loop(unique_fd inotify, std::string path, unique_fd wake, callback cb)
    : inotify_(std::move(inotify)), path_(std::move(path)), wake_(std::move(wake)),
      cb_(std::move(cb)) {}

  /// Watches what `path_` names now (again after it was removed or moved).
  outcome<void> watch();
  void run();
  void wake() {
    const uint64_t one = 1;
    // A full eventfd counter (impossible here) would fail with EAGAIN; the
    // thread is awake then anyway.
    [[maybe_unused]] const auto n = ::write(wake_.get(), &one, sizeof(one));
  }

private:
  bool is_symlink(const std::string& name) const;
  /// A link, or a file with content (a hard link made into place).
  bool has_content(const std::string& name) const;

  unique_fd inotify_;
  std::string path_;
  int wd_ = -1; ///< the watch; -1 while the path names no directory
  unique_fd wake_;
  callback cb_;
};

outcome<std::unique_ptr<directory_watcher>> directory_watcher::start(const std::string& dir,
                                                                     callback cb) {
  unique_fd in{::inotify_init1(IN_NONBLOCK | IN_CLOEXEC)};
  if (!in)
    return errno_failure("inotify_init1");
  unique_fd wake{::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)};
  if (!wake)
    return errno_failure("eventfd");
  auto l = std::make_shared<loop>(std::move(in), dir, std::move(wake), std::move(cb));
  if (auto watched = l->watch(); !watched)
    return watched.error();
  std::unique_ptr<directory_watcher> w{new directory_watcher(l)};
  w->thread_ = std::thread{[l] { l->run(); }};
  return w;
}

directory_watcher::~directory_watcher() {
  loop_->wake();
  if (!thread_.joinable())
    return;
  // The callback may drop the last reference to whoever owns this watcher
  // (an actor whose state holds it): this destructor then runs on the
  // watcher thread, which cannot join itself. It finishes on its own, with
  // the loop it holds, once it is back from the callback.
  if (thread_.get_id() == std::this_thread::get_id())
    thread_.detach();
  else
    thread_.join();
}

outcome<void> directory_watcher::loop::watch() {
  // The path is resolved again each time: a directory reached through a
  // link that is swapped (a ConfigMap's `policies -> ..data/policies`) is
  // another directory after each update.
  const int wd = ::inotify_add_watch(inotify_.get(), path_.c_str(), watch_mask);
  if (wd < 0)
    return errno_failure("inotify_add_watch " + path_);
  wd_ = wd;
  return {};
}

// Names are looked up by path, with no fd kept on the directory: an open fd
// would hold back the IN_DELETE_SELF that says the directory was replaced.
// What they find is a hint for when to rescan, never what is loaded.
bool directory_watcher::loop::is_symlink(const std::string& name) const {
  struct stat st {};
  return ::lstat((path_ + "/" + name).c_str(), &st) == 0 && S_ISLNK(st.st_mode);
}

bool directory_watcher::loop::has_content(const std::string& name) const {
  struct stat st {};
  return ::lstat((path_ + "/" + name).c_str(), &st) == 0 &&
         (S_ISLNK(st.st_mode) || st.st_size > 0);
}


void directory_watcher::loop::run() {
  alignas(inotify_event) char buf[16384];
  for (;;) {
    pollfd fds[2] = {{inotify_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    // Unwatched (the directory went away): try again every second.
    const int timeout_ms = wd_ < 0 ? 1000 : -1;
    const int ready = ::poll(fds, 2, timeout_ms);
    if (ready < 0) {
      if (errno == EINTR)
        continue;
      return;
    }
    if (fds[1].revents != 0)
      return;
    if (ready == 0) {
      if (watch())
        cb_(std::string{});
      continue;
    }
    if ((fds[0].revents & (POLLERR | POLLHUP | POLLNVAL)) != 0)
      return;
    if ((fds[0].revents & POLLIN) == 0)
      continue;
    // One read can hold many events; report each file once per batch, and
    // only the rescan when there is one (it rereads every file anyway).
    std::set<std::string> changed;
    bool rescan = false;
    bool rewatch = false;
    // Bounded, so that a stream of events cannot hold off the callbacks or
    // the destructor for long.
    for (int reads = 0; reads < 64; ++reads) {
      const ssize_t n = ::read(inotify_.get(), buf, sizeof(buf));
      if (n <= 0)
        break;
      for (size_t off = 0; off + sizeof(inotify_event) <= static_cast<size_t>(n);) {
        inotify_event ev;
        std::memcpy(&ev, buf + off, sizeof(ev));
        const size_t total = sizeof(inotify_event) + ev.len;
        if (off + total > static_cast<size_t>(n))
          break;
        if ((ev.mask & IN_Q_OVERFLOW) != 0) {
          rescan = true;
        } else if ((ev.mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) != 0) {
          // The directory itself was removed or moved: watch what its path
          // names now.
          rescan = true;
          rewatch = rewatch || ev.wd == wd_;
        } else if (ev.len > 0 && ev.wd == wd_) {
          const char* name = buf + off + sizeof(inotify_event);
          const std::string file{name, ::strnlen(name, ev.len)};
          const bool created = (ev.mask & IN_CREATE) != 0;
          const bool policy_name = policy::is_policy_file_name(file);
          if (created && !is_symlink(file) && !(policy_name && has_content(file))) {
            // a new empty file (its IN_CLOSE_WRITE follows) or a directory
          } else if (policy_name) {
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
    if (rewatch) {
      ::inotify_rm_watch(inotify_.get(), wd_); // gone already, or moved away
      wd_ = -1;
      (void)watch(); // failing: retried every second
    }
    if (rescan) {
      cb_(std::string{});
      continue;
    }
    for (const auto& f : changed)
      cb_(f);
  }
}

} // namespace castellan
