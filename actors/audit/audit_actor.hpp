#pragma once

/// @file audit_actor.hpp
/// The audit actor's typed interface and its spawn helper. Events are
/// fire-and-forget; the actor filters them (audit_kind.hpp), encodes them
/// (audit_record.hpp) and hands each line to its sinks: the JSON-lines file
/// (file_sink.hpp), stdout/stderr, and subscribers. See docs/audit.md.

#include <memory>
#include <utility>

#include <caf/actor.hpp>
#include <caf/actor_system.hpp>
#include <caf/expected.hpp>
#include <caf/typed_actor.hpp>

#include "actors/audit/audit_pressure.hpp"
#include "actors/messages.hpp"
#include "actors/telemetry/telemetry_actor.hpp"

namespace castellan {

/// Subscribers are plain actors that handle `audit_entry`: each entry is sent
/// as a request and the reply (a `void` handler's empty one will do) returns
/// the subscriber's credit; `audit_config::subscriber_window` unanswered
/// entries make further entries for it dropped, counted and reported.
using audit_actor =
    caf::typed_actor<caf::reacts_to<exec_started>, caf::reacts_to<exec_finished>,
                     caf::reacts_to<security_event>, caf::reacts_to<worker_lost_event>,
                     caf::reacts_to<policy_rejection>, caf::reacts_to<connection_record>,
                     // reconfigures (e.g. after a policy reload); an unopenable file is an error
                     // and leaves the previous configuration in place
                     caf::replies_to<audit_config>::with<audit_stats>,
                     caf::reacts_to<subscribe_atom, caf::actor, audit_filter>,
                     caf::reacts_to<unsubscribe_atom, caf::actor>,
                     caf::replies_to<status_atom>::with<audit_stats>,
                     // reports pending drops, then waits until every record so far is written
                     // (and synced, per the fsync policy)
                     caf::replies_to<audit_flush_atom>::with<audit_stats>>;

/// The audit actor's whole interface: the public one plus its own periodic
/// report timer, which only it sends.
using audit_internal_actor = audit_actor::extend<caf::reacts_to<audit_tick_atom>>;

/// What the audit actor reports to, besides its sinks.
struct audit_links {
  /// Receives castellan_audit_records_total and castellan_audit_dropped_total.
  telemetry_actor telemetry;
  /// The actor's backlog and the file sink's queue depth, for producers that
  /// can hold work back (the pool's admission) before either grows.
  std::shared_ptr<audit_pressure> pressure;
};

/// Sends `ev` to the audit actor fire-and-forget, counting it in `pressure`
/// (may be null) so that `pressure->saturated()` sees the actor's backlog.
/// `sender` is anything with `->send` (an actor's `self`, a scoped_actor).
template <class Sender, class Event>
void post_audit(Sender& sender, const audit_actor& audit,
                const std::shared_ptr<audit_pressure>& pressure, Event&& ev) {
  if (pressure)
    pressure->posted();
  sender->send(audit, std::forward<Event>(ev));
}

/// Opens the sinks of `cfg` and spawns the audit actor on its own thread
/// (detached: a full writer queue blocks it, never a scheduler thread). Fails
/// if the file sink cannot be opened.
caf::expected<audit_actor> spawn_audit(caf::actor_system& sys, audit_config cfg,
                                       audit_links links = {});

} // namespace castellan
