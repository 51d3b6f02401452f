#pragma once

/// @file proxy_messages.hpp
/// Messages of the egress proxy actor (registered in actors/messages.hpp).

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <caf/meta/type_name.hpp>

#include "actors/policy/policy_messages.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan {

/// A pool hands the proxy one worker's end of its egress socket pair.
/// `socket` and `current_exec` are local objects (an fd, a shared counter)
/// and do not cross nodes: a link only makes sense to a proxy in the
/// pool's own process, and one that arrives without them is ignored.
struct egress_link {
  std::string pool;
  uint64_t worker_id = 0;
  std::shared_ptr<unique_fd> socket;
  policy_snapshot policy;
  /// The exec running on the worker (0: none), stored by the pool before it
  /// sends the code.
  std::shared_ptr<std::atomic<uint64_t>> current_exec;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_link& x) {
  return f(caf::meta::type_name("egress_link"), x.pool, x.worker_id, x.policy);
}

/// The proxy's counters (see proxy::egress_stats).
struct egress_status {
  uint32_t workers = 0;
  uint32_t open_connections = 0;
  uint64_t accepted = 0;
  uint64_t refused = 0;
  uint64_t denied = 0;
  uint64_t bytes_out = 0;
  uint64_t bytes_in = 0;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, egress_status& x) {
  return f(caf::meta::type_name("egress_status"), x.workers, x.open_connections, x.accepted,
           x.refused, x.denied, x.bytes_out, x.bytes_in);
}

} // namespace castellan
