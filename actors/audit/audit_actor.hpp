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

#include "actors/audit/audit_credits.hpp"
#include "actors/messages.hpp"
#include "actors/telemetry/telemetry_actor.hpp"

namespace castellan {

/// A producer that joins the audit's flow control (audit_credits.hpp): it
/// receives the credits of its events back as the audit actor handles them.
using audit_producer = caf::typed_actor<caf::reacts_to<audit_credit_atom, uint64_t>>;

/// Subscribers are plain actors that handle `audit_entry`: each entry is sent
/// as a request and the reply (a `void` handler's empty one will do) returns
/// the subscriber's credit; `audit_config::subscriber_window` unanswered
/// entries make further entries for it dropped, counted and reported.
using audit_actor =
    caf::typed_actor<caf::reacts_to<exec_started>, caf::reacts_to<exec_finished>,
                     caf::reacts_to<security_event>, caf::reacts_to<worker_lost_event>,
                     caf::reacts_to<policy_rejection>, caf::reacts_to<connection_record>,
                     caf::reacts_to<session_record>,
                     // reconfigures (e.g. after a policy reload); an unopenable file is an error
                     // and leaves the previous configuration in place
                     caf::replies_to<audit_config>::with<audit_stats>,
                     caf::reacts_to<subscribe_atom, caf::actor, audit_filter>,
                     caf::reacts_to<unsubscribe_atom, caf::actor>,
                     caf::replies_to<status_atom>::with<audit_stats>,
                     // reports pending drops, then waits until every record so far is written
                     // (and synced, per the fsync policy)
                     caf::replies_to<audit_flush_atom>::with<audit_stats>,
                     // the sender joins the flow control as a producer (it must
                     // handle audit_credit_atom); the answer is its window
                     // (audit_config::producer_window). Events it sent before joining
                     // are not credited: send nothing before the join.
                     caf::replies_to<audit_join_atom>::with<uint64_t>>;

/// The audit actor's whole interface: the public one plus its own timers,
/// which only it sends: the periodic report, and the retry of credits held
/// back while the writer queue was congested.
using audit_internal_actor =
    audit_actor::extend<caf::reacts_to<audit_tick_atom>, caf::reacts_to<audit_release_atom>>;

/// What the audit actor reports to, besides its sinks.
struct audit_links {
  /// Receives castellan_audit_records_total and castellan_audit_dropped_total.
  telemetry_actor telemetry;
};

/// Sends `ev` to the audit actor fire-and-forget and spends one of the
/// sender's credits. `sender` is anything with `->send` (an actor's `self`,
/// a scoped_actor) that joined the audit actor as a producer.
template <class Sender, class Event>
void post_audit(Sender& sender, const audit_actor& audit, audit_credits& credits, Event&& ev) {
  credits.spent();
  sender->send(audit, std::forward<Event>(ev));
}

/// Opens the sinks of `cfg` and spawns the audit actor on its own thread
/// (detached: a full writer queue blocks it, never a scheduler thread). Fails
/// if the file sink cannot be opened.
caf::expected<audit_actor> spawn_audit(caf::actor_system& sys, audit_config cfg,
                                       audit_links links = {});

} // namespace castellan
