#include "actors/api/audit_stream.hpp"

#include <chrono>
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include <caf/blocking_actor.hpp>
#include <caf/event_based_actor.hpp>
#include <caf/stateful_actor.hpp>
#include <nlohmann/json.hpp>

#include "actors/api/api_error.hpp"
#include "actors/api/audit_history.hpp"
#include "actors/api/output_events.hpp"
#include "actors/audit/audit_query.hpp"

namespace castellan::api {

namespace {

/// History is sent in pieces of about this size, each written before the
/// next is read: a long file costs the server one piece of memory.
constexpr std::size_t history_piece_bytes = 64 * 1024;

/// An entry that came while the history was being sent: its event waits,
/// and so does its answer (the audit actor's credit).
struct held_entry {
  std::string json;
  std::string kind;
  uint64_t exec_id = 0;
  uint64_t dropped = 0;
  caf::response_promise promise;
};

struct stream_state {
  static inline const char* name = "castellan.audit_stream";

  std::shared_ptr<audit_stream_sink> sink;
  uint64_t request_id = 0;
  audit_stream_request req;
  audit_actor audit;
  bool live = false;
  bool ended = false;
  std::deque<held_entry> held;
  std::unordered_set<std::string> held_json; ///< what history must not repeat
  /// Answers waiting for their event to be written, by piece number.
  std::unordered_map<uint64_t, caf::response_promise> unwritten;
  uint64_t next_piece = 1;
  uint64_t dropped = 0; ///< not yet reported to the client
  uint64_t history_sent = 0;
  /// With req.own_token: the execs whose exec_start named it, each with
  /// when it was learnt; `mine_order` evicts the oldest past own_execs_cap.
  std::unordered_map<uint64_t, uint64_t> mine;
  std::deque<std::pair<uint64_t, uint64_t>> mine_order;
  uint64_t mine_clock = 0;
};

/// The execs a stream remembers as its token's: past it the oldest are
/// forgotten, and their later records (rare: an exec that ran through
/// this many others) are left out, never shown to the wrong token.
constexpr std::size_t own_execs_cap = 65536;

using stream_actor = caf::stateful_actor<stream_state>;

bool pool_allowed(const stream_state& st, const std::string& pool) {
  return !st.req.pools || (!pool.empty() && st.req.pools->count(pool) != 0);
}

/// Whether a record of `kind` about exec `exec_id` is shown, in the order
/// the records come: with req.own_token, an `exec_start` says whose its
/// exec is (an exec id of an earlier daemon's run that comes back is
/// decided anew), and only the token's execs, and records of none, pass.
/// The client's kind filter applies here too: the stream also receives
/// the `exec_start`s it did not ask for, to learn from them.
bool owned(stream_state& st, const std::string& kind, uint64_t exec_id, const std::string& json) {
  if (!st.req.own_token)
    return true;
  const bool wanted = st.req.params.kinds.empty() || st.req.params.kinds.count(kind) != 0;
  if (kind == "exec_start") {
    const auto rec = nlohmann::json::parse(json, nullptr, false);
    bool its = false;
    if (rec.is_object())
      if (auto o = rec.find("origin"); o != rec.end() && o->is_object())
        if (auto t = o->find("token"); t != o->end() && t->is_string())
          its = t->get<std::string>() == *st.req.own_token;
    if (!its) {
      st.mine.erase(exec_id);
      return false;
    }
    const uint64_t at = ++st.mine_clock;
    st.mine[exec_id] = at;
    st.mine_order.emplace_back(exec_id, at);
    while (st.mine_order.size() > own_execs_cap) {
      auto [id, when] = st.mine_order.front();
      st.mine_order.pop_front();
      if (auto m = st.mine.find(id); m != st.mine.end() && m->second == when)
        st.mine.erase(m);
    }
    return wanted;
  }
  return wanted && (exec_id == 0 || st.mine.count(exec_id) != 0);
}

/// The kinds to ask the audit actor (and the file) for: the client's, and
/// with own_token `exec_start` as well (owned() needs them).
std::set<std::string> kinds_to_read(const audit_stream_request& req) {
  std::set<std::string> kinds = req.params.kinds;
  if (req.own_token && !kinds.empty())
    kinds.insert("exec_start");
  return kinds;
}

std::string dropped_event(uint64_t n) {
  return sse_event("dropped", nlohmann::json{{"dropped", n}}.dump());
}

/// Hands `bytes` to the server; `rp` (if any) is answered once they are written.
void send_piece(stream_actor* self, std::string bytes, caf::response_promise rp) {
  auto& st = self->state;
  if (st.ended) {
    if (rp.pending())
      rp.deliver(caf::unit);
    return;
  }
  const uint64_t k = st.next_piece++;
  std::function<void()> on_written;
  if (rp.pending()) {
    st.unwritten.emplace(k, std::move(rp));
    on_written = [hdl = caf::actor_cast<caf::actor>(self), k] {
      caf::anon_send(hdl, written_atom::value, k);
    };
  }
  st.sink->piece(st.request_id, std::move(bytes), std::move(on_written));
}

/// The event of one record (after a `dropped` event when there are losses
/// to report).
void emit(stream_actor* self, const std::string& json, caf::response_promise rp) {
  auto& st = self->state;
  if (st.unwritten.size() >= audit_stream_unwritten_cap) {
    ++st.dropped;
    if (rp.pending())
      rp.deliver(caf::unit);
    return;
  }
  std::string bytes;
  if (st.dropped > 0)
    bytes = dropped_event(std::exchange(st.dropped, 0));
  bytes += sse_event("audit", json);
  send_piece(self, std::move(bytes), std::move(rp));
}

void end(stream_actor* self, std::string last_events) {
  auto& st = self->state;
  if (st.ended)
    return;
  st.ended = true;
  st.sink->finish(st.request_id, std::move(last_events));
  self->quit();
}

void keep_alive(stream_actor* self) {
  self->delayed_send(self, audit_keep_alive, heartbeat_atom::value);
}

/// Everything before is sent: entries flow straight from now on.
void go_live(stream_actor* self, uint64_t history, const std::string& error) {
  auto& st = self->state;
  st.live = true;
  nlohmann::json j = {{"v", 1}, {"history", history}};
  if (!error.empty())
    j["history_error"] = error;
  send_piece(self, sse_event("live", j.dump()), {});
  auto held = std::move(st.held);
  st.held.clear();
  st.held_json.clear();
  for (auto& h : held) {
    st.dropped += h.dropped;
    if (owned(st, h.kind, h.exec_id, h.json))
      emit(self, h.json, std::move(h.promise));
    else if (h.promise.pending())
      h.promise.deliver(caf::unit);
  }
  keep_alive(self);
}

/// Reads the audit file on a thread of its own (blocking I/O) and hands the
/// matching lines to `stream` a piece at a time, each once the one before
/// is written; then `(history_atom, count, error)`.
void history_reader(caf::blocking_actor* self, caf::actor stream, file_sink_config file,
                    audit_params params, std::optional<std::set<std::string>> pools) {
  auto history = audit_history::open(file.path, file.max_files);
  tail_filter filter;
  filter.kinds = params.kinds;
  filter.exec_id = params.exec_id;
  filter.since_ns = params.since_ns.value_or(INT64_MIN);
  std::string piece;
  uint64_t count = 0;
  bool going = true;
  auto hand_over = [&] {
    if (piece.empty())
      return;
    self->request(stream, caf::infinite, history_atom::value, std::move(piece))
        .receive([] {}, [&](caf::error&) { going = false; });
    piece.clear();
  };
  std::string line;
  while (going && history.next(line)) {
    auto rec = parse_audit_line(line);
    if (!rec || !tail_matches(filter, *rec))
      continue;
    if (pools) {
      auto p = rec->find("pool");
      if (p == rec->end() || !p->is_string() || pools->count(p->get<std::string>()) == 0)
        continue;
    }
    piece += line;
    piece += '\n';
    ++count;
    if (piece.size() >= history_piece_bytes)
      hand_over();
  }
  hand_over();
  if (going)
    self->send(stream, history_atom::value, count, history.error());
}

/// The stream's behavior. A function with arguments, not a capturing
/// lambda (see api_actor.cpp).
caf::behavior audit_stream(stream_actor* self, supervisor_actor supervisor,
                           std::shared_ptr<audit_stream_sink> sink, uint64_t request_id,
                           audit_stream_request req) {
  auto& st = self->state;
  st.sink = std::move(sink);
  st.request_id = request_id;
  st.req = std::move(req);
  self->set_exit_handler([=](caf::exit_msg& msg) {
    auto& s = self->state;
    if (s.audit)
      self->send(s.audit, unsubscribe_atom::value, caf::actor_cast<caf::actor>(self));
    self->quit(msg.reason);
  });
  self->set_down_handler([=](caf::down_msg&) {
    end(self, sse_event("end", R"({"v":1,"reason":"the audit actor stopped"})"));
  });
  self->request(supervisor, std::chrono::seconds(10), get_audit_atom::value)
      .then(
          [=](audit_actor& audit) {
            auto& s = self->state;
            if (!audit) {
              s.ended = true;
              s.sink->refuse(s.request_id,
                             http_response{404,
                                           "application/json",
                                           error_body("audit_disabled",
                                                      "this server records no audit (serve "
                                                      "--config with an [audit] section does)"),
                                           {}});
              self->quit();
              return;
            }
            s.audit = audit;
            self->monitor(audit);
            audit_filter filter;
            filter.kinds = kinds_to_read(s.req);
            filter.exec_id = s.req.params.exec_id;
            if (s.req.pools && s.req.pools->size() == 1)
              filter.pool = *s.req.pools->begin();
            self->send(audit, subscribe_atom::value, caf::actor_cast<caf::actor>(self),
                       std::move(filter));
            auto failed = [=](caf::error& err) {
              end(self,
                  sse_event(
                      "end",
                      nlohmann::json{{"v", 1}, {"reason", self->system().render(err)}}.dump()));
            };
            if (!s.req.params.since_ns) {
              // Answered after the subscription is in place: `live` means it is.
              self->request(audit, std::chrono::seconds(30), status_atom::value)
                  .then([=](audit_stats&) { go_live(self, 0, {}); }, failed);
              return;
            }
            // Everything recorded before the subscription is in the file once
            // the flush is answered; what came since is held, and history
            // leaves out the lines held.
            self->request(audit, std::chrono::seconds(60), audit_flush_atom::value)
                .then(
                    [=](audit_stats&) {
                      auto& s2 = self->state;
                      audit_params read = s2.req.params;
                      read.kinds = kinds_to_read(s2.req);
                      self->system().spawn<caf::detached>(history_reader,
                                                          caf::actor_cast<caf::actor>(self),
                                                          s2.req.file, std::move(read),
                                                          s2.req.pools);
                    },
                    failed);
          },
          [=](caf::error& err) {
            auto& s = self->state;
            s.ended = true;
            s.sink->refuse(s.request_id,
                           http_response{503,
                                         "application/json",
                                         error_body("unavailable", self->system().render(err)),
                                         {}});
            self->quit();
          });
  return {
      [=](audit_entry& e) {
        auto& s = self->state;
        auto rp = self->make_response_promise();
        s.dropped += e.dropped;
        if (!pool_allowed(s, e.pool) ||
            (s.req.params.since_ns && e.timestamp_ns < *s.req.params.since_ns)) {
          rp.deliver(caf::unit);
          return;
        }
        if (!s.live) {
          if (s.held.size() >= audit_stream_unwritten_cap) {
            ++s.dropped;
            rp.deliver(caf::unit);
            return;
          }
          s.held_json.insert(e.json);
          s.held.push_back(
              held_entry{std::move(e.json), std::move(e.kind), e.exec_id, 0, std::move(rp)});
          return;
        }
        if (!owned(s, e.kind, e.exec_id, e.json)) {
          rp.deliver(caf::unit);
          return;
        }
        emit(self, e.json, std::move(rp));
      },
      [=](written_atom, uint64_t k) {
        auto& s = self->state;
        auto it = s.unwritten.find(k);
        if (it == s.unwritten.end())
          return;
        auto rp = std::move(it->second);
        s.unwritten.erase(it);
        rp.deliver(caf::unit);
      },
      [=](history_atom, std::string& lines) {
        auto& s = self->state;
        auto rp = self->make_response_promise();
        std::string bytes;
        std::size_t start = 0;
        while (start < lines.size()) {
          auto nl = lines.find('\n', start);
          if (nl == std::string::npos)
            nl = lines.size();
          std::string line = lines.substr(start, nl - start);
          start = nl + 1;
          if (s.held_json.count(line) != 0)
            continue; // it comes live, in its place
          if (s.req.own_token) {
            auto rec = parse_audit_line(line);
            if (!rec)
              continue;
            const auto k = rec->find("kind");
            const auto x = rec->find("exec_id");
            if (!owned(s, k != rec->end() && k->is_string() ? k->get<std::string>() : std::string{},
                       x != rec->end() && x->is_number_unsigned() ? x->get<uint64_t>() : 0, line))
              continue;
          }
          bytes += sse_event("audit", line);
          ++s.history_sent;
        }
        if (bytes.empty()) {
          rp.deliver(caf::unit);
          return;
        }
        send_piece(self, std::move(bytes), std::move(rp));
      },
      [=](history_atom, uint64_t, std::string& error) {
        go_live(self, self->state.history_sent, error);
      },
      [=](heartbeat_atom) {
        auto& s = self->state;
        if (s.ended)
          return;
        if (s.unwritten.empty())
          send_piece(self, ": keep-alive\n\n", {});
        keep_alive(self);
      },
  };
}

} // namespace

caf::actor spawn_audit_stream(caf::actor_system& sys, supervisor_actor supervisor,
                              std::shared_ptr<audit_stream_sink> sink, uint64_t request_id,
                              audit_stream_request req) {
  return sys.spawn(audit_stream, std::move(supervisor), std::move(sink), request_id,
                   std::move(req));
}

} // namespace castellan::api
