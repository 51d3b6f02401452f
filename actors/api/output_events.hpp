#pragma once

/// @file output_events.hpp
/// An exec's output as server-sent events (`Accept: text/event-stream`,
/// docs/api.md): `stdout` and `stderr` events as the pool hands the pieces
/// over, then one `result` event. A piece that is not UTF-8 comes as base64
/// (`"base64": true`); the first bytes of a character cut between two
/// pieces wait for the next, so that text stays text.

#include <cstdint>
#include <string>
#include <string_view>

#include "actors/exec_messages.hpp"

namespace castellan::api {

/// One event: `event: NAME`, `data: DATA` (one line: JSON), a blank line.
std::string sse_event(std::string_view name, std::string_view data);

/// The events of one streamed exec.
class output_events {
public:
  explicit output_events(uint64_t request_id) : request_id_(request_id) {}

  uint64_t request_id() const { return request_id_; }

  /// True once a piece of output has been turned into an event.
  bool started() const { return started_; }

  /// The event for a piece of output ("" when all of it waits for the
  /// rest of a character).
  std::string piece(const exec_output& o);

  /// What `r` has that the pieces did not carry (output that came with the
  /// result only, or the last bytes held back), as events; then the
  /// `result` event, whose data is `result_json`.
  std::string finish(const exec_result& r, std::string_view result_json);

private:
  struct channel {
    uint64_t sent = 0; ///< bytes of the output already in events
    std::string held;  ///< the start of a cut character
  };

  std::string event_for(bool is_stderr, channel& c, std::string data);

  uint64_t request_id_;
  bool started_ = false;
  channel out_;
  channel err_;
};

} // namespace castellan::api
