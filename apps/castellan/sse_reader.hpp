#pragma once

/// @file sse_reader.hpp
/// Server-sent events (text/event-stream) read from the pieces of a body as
/// they arrive: the daemon's events are `event: NAME`, one `data: …` line
/// and a blank line (docs/api.md), but a piece may end anywhere.

#include <functional>
#include <string>
#include <string_view>

namespace castellan::cli {

class sse_reader {
public:
  /// Called for each whole event with its name ("message" when it has no
  /// `event:` line) and its data (the `data:` lines joined by '\n'); it
  /// returns false to stop reading.
  using handler = std::function<bool(std::string_view name, std::string_view data)>;

  /// Adds `piece` and hands every event it completes to `on_event`; false
  /// once `on_event` returned false (the events after it are left unread).
  bool feed(std::string_view piece, const handler& on_event);

  /// Bytes of an event not yet complete.
  std::size_t pending() const { return pending_.size(); }

private:
  std::string pending_;
};

} // namespace castellan::cli
