#pragma once

/// @file egress_proxy.hpp
/// The egress proxy's engine: one asio::io_context on its own thread, the
/// workers' AF_UNIX links, and a session per connection. CAF-free (the
/// proxy actor wraps it; tests and the bench drive it directly). Every
/// public member function is thread-safe: it posts to the I/O thread.

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/proxy/egress_limits.hpp"
#include "actors/proxy/egress_session.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::proxy {

/// A snapshot of the proxy's counters.
struct egress_stats {
  uint32_t workers = 0;
  uint32_t open_connections = 0;
  uint64_t accepted = 0;
  uint64_t refused = 0; ///< over a connection limit
  uint64_t denied = 0;  ///< by the policy
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
};

class egress_proxy {
public:
  /// `sink` receives every connection record on the I/O thread.
  egress_proxy(egress_limits limits, record_sink sink);
  /// Closes every connection and joins the I/O thread.
  ~egress_proxy();

  egress_proxy(const egress_proxy&) = delete;
  egress_proxy& operator=(const egress_proxy&) = delete;

  /// Serves worker `worker_id` of `pool`: every socket that arrives on
  /// `link` (SCM_RIGHTS, see platform/linux/fd_passing.hpp) is a connection
  /// from that worker, decided under `policy`. `current_exec` is the exec
  /// running there (0: none). A link with the same pool and id replaces the
  /// previous one (and closes its connections).
  void attach(std::string pool, uint64_t worker_id, unique_fd link,
              std::shared_ptr<const policy::compiled_policy> policy,
              std::shared_ptr<const std::atomic<uint64_t>> current_exec);

  /// Closes the link and every connection of that worker.
  void detach(std::string pool, uint64_t worker_id);

  /// The counters, read on the I/O thread (blocks the caller until then).
  egress_stats stats();

  const egress_limits& limits() const noexcept { return limits_; }

private:
  struct link_reader;
  using key = std::pair<std::string, uint64_t>;

  void watch(const std::shared_ptr<link_reader>& reader);
  void accept_from(const std::shared_ptr<link_reader>& reader);
  void serve(const std::shared_ptr<worker_link>& link, unique_fd fd);
  void drop(const key& k);

  // Declared before the io_context: sessions destroyed with it still see them.
  egress_limits limits_;
  record_sink sink_;
  egress_counters counters_;
  uint64_t refused_ = 0;
  std::map<key, std::shared_ptr<link_reader>> links_;

  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::thread thread_;
};

} // namespace castellan::proxy
