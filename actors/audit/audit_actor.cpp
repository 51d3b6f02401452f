#include "actors/audit/audit_actor.hpp"

#include <chrono>
#include <map>
#include <utility>
#include <unistd.h>

#include <caf/stateful_actor.hpp>
#include <caf/typed_event_based_actor.hpp>

#include "actors/audit/audit_record.hpp"
#include "actors/audit/file_sink.hpp"
#include "actors/audit/rfc3339.hpp"
#include "actors/errors.hpp"
#include "actors/telemetry/telemetry_core.hpp"

namespace castellan {

namespace {

struct subscriber_info {
  caf::actor hdl;
  audit_filter filter;
  uint32_t in_flight = 0;  ///< entries sent and not yet answered
  uint64_t unreported = 0; ///< drops not yet in a drop_report
  uint64_t dropped_total = 0;
  uint64_t undelivered = 0; ///< drops since the last entry sent (audit_entry::dropped)
  std::string label; ///< the drop_report's `sink`
};

/// A producer that joined the flow control (audit_credits.hpp).
struct producer_info {
  audit_producer hdl;
  uint64_t window = 1; ///< what it was granted (a reconfiguration does not change it)
  uint64_t owed = 0;   ///< its events handled whose credits it has not had back
};

struct audit_state {
  static inline const char* name = "castellan.audit";

  audit_config cfg;
  audit_links links;
  std::shared_ptr<file_sink> file;
  std::shared_ptr<file_sink> out;
  std::shared_ptr<file_sink> err;
  std::map<caf::actor_addr, subscriber_info> subs;
  std::map<caf::actor_addr, producer_info> producers;
  uint64_t next_seq = 1;
  audit_stats counters;               ///< received, recorded, filtered, subscriber_dropped
  file_sink_stats retired;            ///< totals of file sinks replaced by reconfiguration
  uint64_t file_dropped_reported = 0; ///< of the current file sink
  uint64_t file_dropped_total = 0;
  std::map<std::string, uint64_t> unsent_records; ///< per kind, for telemetry
  std::map<std::string, uint64_t> unsent_drops;   ///< per sink, for telemetry
  bool tick_pending = false;
  bool release_pending = false; ///< a retry of withheld credits is scheduled
};

using audit_pointer = audit_internal_actor::stateful_pointer<audit_state>;

template <class T> std::string_view event_syscall(const T&) {
  return {};
}
std::string_view event_syscall(const security_event& x) {
  return syscall_of(x);
}
std::string_view event_syscall(const connection_record& x) {
  return syscall_of(x);
}

// The report timer runs only while something is waiting to be reported: an
// idle audit actor holds no reference to itself and goes away with its
// last handle, so the actor system can shut down.
void schedule_tick(audit_pointer self) {
  auto& st = self->state;
  if (st.tick_pending)
    return;
  st.tick_pending = true;
  self->delayed_send(caf::actor_cast<audit_internal_actor>(self),
                     std::chrono::milliseconds(std::max<uint32_t>(st.cfg.report_interval_ms, 1)),
                     audit_tick_atom::value);
}

// -- producers' credits ----------------------------------------------------------

/// Credits go back in batches, not one message per event: a sixteenth of the
/// producer's window, so it never waits on a batch that has not filled.
uint64_t credit_batch(const producer_info& p) {
  return std::max<uint64_t>(p.window / 16, 1);
}

/// Any sink falling behind: the file, or stdout/stderr (a slow log pipe).
bool congested(const audit_state& st) {
  return (st.file && st.file->congested()) || (st.out && st.out->congested()) ||
         (st.err && st.err->congested());
}

// While the writer queue is congested, credits stay here; a short timer
// retries, since a producer whose window is spent sends nothing that would.
void schedule_release(audit_pointer self) {
  auto& st = self->state;
  if (st.release_pending)
    return;
  st.release_pending = true;
  self->delayed_send(caf::actor_cast<audit_internal_actor>(self), std::chrono::milliseconds(5),
                     audit_release_atom::value);
}

/// Returns what `p` is owed, unless the writer queue is congested.
void release(audit_pointer self, producer_info& p) {
  if (p.owed == 0)
    return;
  if (congested(self->state)) {
    schedule_release(self);
    return;
  }
  self->send(p.hdl, audit_credit_atom::value, p.owed);
  p.owed = 0;
}

void release_all(audit_pointer self) {
  for (auto& [addr, p] : self->state.producers)
    release(self, p);
}

/// The event in hand came from a producer that joined: owe it its credit.
/// Events from anyone else (the supervisor's rare records, tests) are not
/// counted: they are not held back either.
void owe_sender(audit_pointer self) {
  auto& st = self->state;
  if (st.producers.empty())
    return;
  const auto& sender = self->current_sender();
  if (!sender)
    return;
  auto i = st.producers.find(caf::actor_cast<caf::actor_addr>(sender));
  if (i == st.producers.end())
    return;
  if (++i->second.owed >= credit_batch(i->second))
    release(self, i->second);
}

// -- subscribers ---------------------------------------------------------------

void credit(audit_pointer self, const caf::actor_addr& addr) {
  auto i = self->state.subs.find(addr);
  if (i != self->state.subs.end() && i->second.in_flight > 0)
    --i->second.in_flight;
}

void deliver(audit_pointer self, const audit_record& rec) {
  auto& st = self->state;
  for (auto& [addr, sub] : st.subs) {
    if (!matches(sub.filter, rec))
      continue;
    if (sub.in_flight >= std::max<uint32_t>(st.cfg.subscriber_window, 1)) {
      // A drop report that finds no room is not itself a drop: counting it
      // would report a stuck subscriber's drops to it forever.
      if (rec.kind == audit_kind::drop_report)
        continue;
      ++sub.unreported;
      ++sub.undelivered;
      ++sub.dropped_total;
      ++st.counters.subscriber_dropped;
      schedule_tick(self);
      continue;
    }
    ++sub.in_flight;
    auto a = addr;
    auto entry = to_entry(rec);
    entry.dropped = std::exchange(sub.undelivered, 0);
    // Any answer, or its absence within the timeout, returns the credit: the
    // window bounds what is in flight, not what the subscriber thinks of it.
    self->request(sub.hdl, std::chrono::milliseconds(st.cfg.subscriber_timeout_ms), std::move(entry))
        .then([=]() { credit(self, a); }, [=](caf::error&) { credit(self, a); });
  }
}

void record(audit_pointer self, const audit_record& rec) {
  auto& st = self->state;
  ++st.counters.recorded;
  if (st.links.telemetry) {
    ++st.unsent_records[std::string{kind_name(rec.kind)}];
    schedule_tick(self);
  }
  if (st.file && st.file->push(rec.json) != file_sink::push_status::queued)
    schedule_tick(self);
  if (st.out)
    st.out->push(rec.json);
  if (st.err)
    st.err->push(rec.json);
  if (!st.subs.empty())
    deliver(self, rec);
}

template <class Event> void on_event(audit_pointer self, const Event& ev) {
  // Owed whatever becomes of the event: its credit is returned once it is
  // handled, and withheld only while the writer queue is congested.
  owe_sender(self);
  auto& st = self->state;
  ++st.counters.received;
  const auto kind = kind_of(ev);
  if (!should_record(st.cfg.enabled, st.cfg.events, kind, event_syscall(ev))) {
    ++st.counters.filtered;
    return;
  }
  record(self, encode(ev, st.next_seq++, realtime_ns()));
}

void report_drop(audit_pointer self, const std::string& sink, uint64_t n, uint64_t total) {
  auto& st = self->state;
  if (st.links.telemetry)
    st.unsent_drops[sink.rfind("subscriber", 0) == 0 ? "subscriber" : sink] += n;
  record(self, encode_drop_report(sink, n, total, st.next_seq++, realtime_ns()));
}

// Turns pending drops into drop_report records and pending counts into
// telemetry increments.
void report(audit_pointer self) {
  auto& st = self->state;
  if (st.file) {
    const auto dropped = st.file->stats().dropped;
    if (dropped > st.file_dropped_reported) {
      const auto n = dropped - st.file_dropped_reported;
      st.file_dropped_reported = dropped;
      st.file_dropped_total += n;
      report_drop(self, "file", n, st.file_dropped_total);
    }
  }
  for (auto& [addr, sub] : st.subs) {
    if (sub.unreported > 0) {
      const auto n = sub.unreported;
      sub.unreported = 0;
      report_drop(self, sub.label, n, sub.dropped_total);
    }
  }
  if (st.links.telemetry) {
    for (auto& [kind, n] : st.unsent_records)
      self->send(st.links.telemetry,
                 counter_increment{metric_names::audit_records, {{"kind", kind}}, n});
    for (auto& [sink, n] : st.unsent_drops)
      self->send(st.links.telemetry,
                 counter_increment{metric_names::audit_dropped, {{"sink", sink}}, n});
  }
  st.unsent_records.clear();
  st.unsent_drops.clear();
}

audit_stats make_stats(audit_pointer self) {
  auto& st = self->state;
  audit_stats s = st.counters;
  file_sink_stats f = st.retired;
  if (st.file) {
    const auto cur = st.file->stats();
    f.written += cur.written;
    f.dropped += cur.dropped;
    f.rotations += cur.rotations;
    f.fsyncs += cur.fsyncs;
    f.write_errors += cur.write_errors;
    f.queue_high_water = std::max(f.queue_high_water, cur.queue_high_water);
    if (!cur.last_error.empty())
      f.last_error = cur.last_error;
    s.queue_capacity = std::max<uint32_t>(st.file->config().queue_records, 1);
  }
  s.file_written = f.written;
  s.file_dropped = f.dropped;
  s.file_rotations = f.rotations;
  s.file_fsyncs = f.fsyncs;
  s.file_write_errors = f.write_errors;
  s.queue_high_water = f.queue_high_water;
  s.subscribers = st.subs.size();
  s.last_error = f.last_error;
  s.producers = st.producers.size();
  for (const auto& [addr, p] : st.producers)
    s.credits_withheld += p.owed;
  return s;
}

bool same_file_config(const file_sink_config& a, const file_sink_config& b) {
  return a.path == b.path && a.max_bytes == b.max_bytes && a.max_files == b.max_files &&
         a.fsync == b.fsync && a.fsync_interval_ms == b.fsync_interval_ms &&
         a.queue_records == b.queue_records && a.queue_bytes == b.queue_bytes &&
         a.block_timeout_ms == b.block_timeout_ms;
}

outcome<std::shared_ptr<file_sink>> open_file(const audit_config& cfg) {
  if (cfg.file.path.empty())
    return std::shared_ptr<file_sink>{};
  auto sink = file_sink::open(cfg.file);
  if (!sink)
    return sink.error();
  return std::shared_ptr<file_sink>(std::move(*sink));
}

std::shared_ptr<file_sink> attach_std(bool wanted, int fd, const audit_config& cfg) {
  if (!wanted)
    return {};
  return std::shared_ptr<file_sink>(file_sink::attach(fd, cfg.file));
}

bool flush_all(audit_pointer self) {
  auto& st = self->state;
  const auto timeout =
      std::chrono::milliseconds(std::max<uint32_t>(st.cfg.file.block_timeout_ms, 1));
  bool ok = true;
  for (auto* s : {&st.file, &st.out, &st.err})
    if (*s)
      ok = (*s)->flush(timeout) && ok;
  return ok;
}

audit_internal_actor::behavior_type audit_impl(audit_pointer self, audit_config cfg, audit_links links,
                                      std::shared_ptr<file_sink> file) {
  auto& st = self->state;
  st.cfg = std::move(cfg);
  st.links = std::move(links);
  st.file = std::move(file);
  st.out = attach_std(st.cfg.to_stdout, STDOUT_FILENO, st.cfg);
  st.err = attach_std(st.cfg.to_stderr, STDERR_FILENO, st.cfg);
  self->set_down_handler([=](caf::down_msg& dm) {
    auto& s = self->state;
    s.producers.erase(dm.source);
    auto i = s.subs.find(dm.source);
    if (i == s.subs.end())
      return;
    auto sub = std::move(i->second);
    s.subs.erase(i);
    if (sub.unreported > 0)
      report_drop(self, sub.label, sub.unreported, sub.dropped_total);
  });
  return {
      [=](const exec_started& x) { on_event(self, x); },
      [=](const exec_finished& x) { on_event(self, x); },
      [=](const security_event& x) { on_event(self, x); },
      [=](const worker_lost_event& x) { on_event(self, x); },
      [=](const policy_rejection& x) { on_event(self, x); },
      [=](const connection_record& x) { on_event(self, x); },
      [=](const session_record& x) { on_event(self, x); },
      [=](audit_config& next) -> caf::result<audit_stats> {
        auto& s = self->state;
        if (!same_file_config(next.file, s.cfg.file)) {
          auto sink = open_file(next);
          if (!sink)
            return make_error(castellan_errc::io_failed, sink.error());
          report(self); // a pending file drop report goes to the old file
          if (s.file) {
            // The old sink drains when its last reference goes; keep its totals.
            const auto old = s.file->stats();
            s.retired.written += old.written;
            s.retired.dropped += old.dropped;
            s.retired.rotations += old.rotations;
            s.retired.fsyncs += old.fsyncs;
            s.retired.write_errors += old.write_errors;
            s.retired.queue_high_water = std::max(s.retired.queue_high_water, old.queue_high_water);
          }
          s.file = std::move(*sink);
          s.file_dropped_reported = 0;
        }
        if (next.to_stdout != (s.out != nullptr))
          s.out = attach_std(next.to_stdout, STDOUT_FILENO, next);
        if (next.to_stderr != (s.err != nullptr))
          s.err = attach_std(next.to_stderr, STDERR_FILENO, next);
        s.cfg = std::move(next);
        return make_stats(self);
      },
      [=](subscribe_atom, caf::actor hdl, audit_filter filter) {
        if (!hdl)
          return;
        auto& sub = self->state.subs[hdl.address()];
        if (!sub.hdl) {
          self->monitor(hdl);
          sub.label = "subscriber:" + std::to_string(hdl.id());
          sub.hdl = std::move(hdl);
        }
        sub.filter = std::move(filter);
      },
      [=](unsubscribe_atom, const caf::actor& hdl) {
        auto& s = self->state;
        auto i = s.subs.find(hdl.address());
        if (i == s.subs.end())
          return;
        if (s.producers.count(hdl.address()) == 0) // a producer's monitor stays
          self->demonitor(hdl);
        auto sub = std::move(i->second);
        s.subs.erase(i);
        if (sub.unreported > 0)
          report_drop(self, sub.label, sub.unreported, sub.dropped_total);
      },
      [=](status_atom) -> audit_stats { return make_stats(self); },
      [=](audit_flush_atom) -> audit_stats {
        report(self);
        flush_all(self);
        release_all(self);
        return make_stats(self);
      },
      [=](audit_join_atom) -> uint64_t {
        // The producer is the sender itself, never a handle it names: credits
        // go back to whoever spent them, and to nobody else.
        auto& s = self->state;
        const uint64_t window = std::max<uint32_t>(s.cfg.producer_window, 1);
        auto hdl = caf::actor_cast<audit_producer>(self->current_sender());
        if (hdl) {
          auto& p = s.producers[hdl.address()];
          if (!p.hdl) {
            self->monitor(hdl);
            p.hdl = std::move(hdl);
            p.window = window;
          }
          return p.window;
        }
        return window;
      },
      [=](audit_tick_atom) {
        self->state.tick_pending = false;
        report(self);
        release_all(self);
      },
      [=](audit_release_atom) {
        self->state.release_pending = false;
        release_all(self);
      },
  };
}

} // namespace

caf::expected<audit_actor> spawn_audit(caf::actor_system& sys, audit_config cfg,
                                       audit_links links) {
  auto file = open_file(cfg);
  if (!file)
    return make_error(castellan_errc::io_failed, file.error());
  // Clients get the public interface only.
  return audit_actor{
      sys.spawn<caf::detached>(audit_impl, std::move(cfg), std::move(links), std::move(*file))};
}

} // namespace castellan
