#pragma once

/// @file audit_stream.hpp
/// One `GET /v1/audit` answer (docs/api.md): an actor that subscribes to the
/// audit actor and turns each entry into a server-sent event, after the
/// records the audit file holds since `since` when asked. It paces itself by
/// its client: an entry is answered (its credit returned to the audit
/// actor) only once its event is handed to the socket, so a client that
/// falls behind has entries dropped by the audit actor, counted and
/// reported to it (`event: dropped`), and never slows the audit actor.
///
/// The events: `audit` (data: the record's JSON line as the file sink
/// writes it), `dropped` (data: `{"dropped":N}`), `live` (once, data:
/// `{"v":1,"history":N}`: the N records from the file are sent, what
/// follows is live), `end` (the server stops), and `: keep-alive` comments.

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>

#include "actors/api/audit_params.hpp"
#include "actors/api/http_server.hpp"
#include "actors/audit/audit_messages.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

namespace castellan::api {

/// Where an audit stream's answer goes (api_service). Called from CAF
/// scheduler threads: must not block.
class audit_stream_sink {
public:
  virtual ~audit_stream_sink() = default;
  /// A plain answer instead of a stream (nothing was sent yet).
  virtual void refuse(uint64_t request_id, http_response response) = 0;
  /// Events; the head (200, text/event-stream) goes with the first.
  /// `on_written` as http_server::stream.
  virtual void piece(uint64_t request_id, std::string bytes, std::function<void()> on_written) = 0;
  /// The last events: the stream is over.
  virtual void finish(uint64_t request_id, std::string bytes) = 0;
};

/// What one stream serves.
struct audit_stream_request {
  audit_params params;
  /// The caller's pools (a token's allowlist); nullopt: every record. With
  /// a list, only records that carry one of these pools are sent.
  std::optional<std::set<std::string>> pools;
  /// Set: only the records of execs whose `exec_start` names this token
  /// in its `origin` (a restricted token's own execs), and the records of
  /// no exec (`exec_id` 0); a record whose `exec_start` the stream has not
  /// seen (before `since`, or dropped) is left out. nullopt: every exec's.
  std::optional<std::string> own_token;
  /// The audit file sink (for `since`); an empty path: none.
  file_sink_config file;
};

/// How often an idle stream sends a comment: it keeps proxies from timing
/// the connection out, and finds a client that left (on TLS, only a write
/// does).
inline constexpr std::chrono::seconds audit_keep_alive{15};

/// Events a stream may have handed to the server and not yet written: past
/// it (only reached when the audit actor stops waiting for answers,
/// audit_config::subscriber_timeout_ms), entries are dropped here and
/// reported the same way.
inline constexpr std::size_t audit_stream_unwritten_cap = 1024;

/// Starts the stream of `request_id`. It ends when it is sent an exit
/// (the client left, the server stops; it unsubscribes) or the audit actor
/// goes away.
caf::actor spawn_audit_stream(caf::actor_system& sys, supervisor_actor supervisor,
                              std::shared_ptr<audit_stream_sink> sink, uint64_t request_id,
                              audit_stream_request req);

} // namespace castellan::api
