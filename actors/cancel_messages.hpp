#pragma once

/// @file cancel_messages.hpp
/// The answer to `cancel_atom, exec_id`. Cancelling is idempotent: an exec
/// that already finished, or that was never seen, is not an error, and the
/// answer says which of these it was.

#include <cstdint>
#include <string>
#include <string_view>

#include <caf/meta/type_name.hpp>

namespace castellan {

/// What a cancel found.
enum class cancel_outcome : uint8_t {
  cancelled_running, ///< the exec was running: its worker was killed, result `cancelled` (125)
  cancelled_queued,  ///< the exec was waiting for a worker: answered `cancelled` without running
  already_finished,  ///< the exec had already been answered: nothing to do
  unknown,           ///< no exec with that id was seen (or it finished long ago)
};

/// The wire name ("cancelled_running", …).
std::string to_string(cancel_outcome x);

struct cancel_reply {
  uint64_t exec_id = 0;
  cancel_outcome outcome = cancel_outcome::unknown;
  std::string pool;   ///< the pool that had it (empty when unknown)
  std::string detail; ///< for humans
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, cancel_reply& x) {
  return f(caf::meta::type_name("cancel_reply"), x.exec_id, x.outcome, x.pool, x.detail);
}

} // namespace castellan
