#pragma once

/// @file directory_watcher.hpp
/// Watches a policy directory with inotify on a dedicated thread and reports
/// each policy file that was written, renamed into place, linked or removed,
/// and asks for a rescan when another name is linked or renamed in (a
/// Kubernetes ConfigMap volume: policy files are links through `..data`,
/// which an update swaps to a new directory). When the directory itself is
/// removed or moved, its path is watched again (a directory reached through
/// such a link), every second until it names a directory. The
/// thread owns the inotify fd and blocks in poll(2) on it and on a wake
/// eventfd; destroying the watcher signals the eventfd and joins the thread.
/// CAF-free: the policy actor's callback forwards events with caf::anon_send.

#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan {

class directory_watcher {
public:
  /// Called on the watcher thread with the name of a changed policy file
  /// (relative to the directory), or with "" when events were lost (queue
  /// overflow) or the directory itself went away: rescan everything.
  using callback = std::function<void(const std::string& file_name)>;

  /// Starts watching `dir`. Fails if inotify or the eventfd cannot be created
  /// or `dir` cannot be watched.
  static outcome<std::unique_ptr<directory_watcher>> start(const std::string& dir, callback cb);

  ~directory_watcher();

  directory_watcher(const directory_watcher&) = delete;
  directory_watcher& operator=(const directory_watcher&) = delete;

private:
  /// The watcher thread's state: the inotify fd, the path, the callback. The
  /// thread holds it too, so it outlives a destructor that runs on the thread
  /// itself (see ~directory_watcher).
  class loop;

  explicit directory_watcher(std::shared_ptr<loop> l) : loop_(std::move(l)) {}

  std::shared_ptr<loop> loop_;
  std::thread thread_;
};

} // namespace castellan
