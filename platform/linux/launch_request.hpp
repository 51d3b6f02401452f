#pragma once

/// @file launch_request.hpp
/// The messages between a pool and its launcher (castellan-launcher), over a
/// SOCK_SEQPACKET pair, one message each way per worker:
///
///     pool ─► launcher   a worker_spec as JSON; its fds attached, in the
///                        order of spec.fds (each parent_fd becomes the
///                        received fd)
///     launcher ─► pool   {"cloned": N} as soon as the worker's process
///                        exists (it is born the pool's child: whatever
///                        happens next, the pool can kill and reap it), then
///                        {"pid": N} with the worker's pidfd attached, or
///                        {"error": "...", "errno": E}
///
/// The launcher announces itself once, before the first request, with
/// {"ready": pid} (or {"error": "..."} when its interpreter did not start).
/// Both sides refuse what they cannot parse, naming the field.

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// The largest message either side accepts.
constexpr std::size_t max_launch_message = 64 * 1024;

/// `spec` as the JSON of a request (its fds go alongside, in spec.fds
/// order). A spec with `mounts` is refused: a launched worker builds its
/// root from its sandbox spec.
outcome<std::string> encode_launch_request(const worker_spec& spec);

/// The spec of a request; each fds[i].parent_fd is `received[i]` (which
/// must be exactly as many as the spec maps).
outcome<worker_spec> decode_launch_request(std::string_view json,
                                           const std::vector<unique_fd>& received);

/// One message from the launcher.
struct launch_reply {
  enum class kind : uint8_t {
    ready,   ///< the announcement: `pid` is the launcher's
    cloned,  ///< the worker's process exists: `pid`
    started, ///< the worker started: `pid` (its pidfd travels with the message)
    failed,  ///< it did not: `error`, `error_code`
  };
  kind what = kind::failed;
  pid_t pid = -1;
  std::string error;
  int error_code = 0; ///< errno of the failure, 0 when none applies
};

std::string encode_launch_reply(const launch_reply& reply);
outcome<launch_reply> decode_launch_reply(std::string_view json);

} // namespace castellan::platform
