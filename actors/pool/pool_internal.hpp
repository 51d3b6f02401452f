#pragma once

/// @file pool_internal.hpp
/// The pool's whole interface: the public pool_actor plus the messages only
/// the pool's own parts send it. The pool hands this handle to its event
/// source and its timers, and to nobody else.

#include <cstdint>

#include "actors/pool/pool_actor.hpp"

namespace castellan {

using pool_internal_actor = pool_actor::extend<
  // From the pool's event source thread: worker `id` rang its doorbell.
  caf::reacts_to<doorbell_atom, uint64_t>,
  // From the pool's event source thread: worker `id`'s process exited.
  caf::reacts_to<exited_atom, uint64_t>,
  // From the pool's event source thread: decided system calls
  // (actors/mediation_messages.hpp).
  caf::reacts_to<syscall_denied>,
  caf::reacts_to<policy_warning>,
  caf::reacts_to<optimistic_violation>,
  // From the pool's event source thread (its ring timer): the deadline of
  // dispatch `serial` on worker `id` passed.
  caf::reacts_to<deadline_atom, uint64_t, uint64_t>,
  // From the pool itself: retry starting workers after a failure.
  caf::reacts_to<refill_atom>,
  // From the pool itself: publish the gauges (occupancy, ring fill) to telemetry.
  caf::reacts_to<gauge_tick_atom>,
  // From the policy actor, which the pool subscribes to when it follows its
  // policy (pool_config::policies): a newer revision, or a refused file.
  caf::reacts_to<policy_updated>, caf::reacts_to<policy_rejected>,
  // From the audit actor, which the pool joins as a producer: `n` of its
  // events handled (audit_credits.hpp).
  caf::reacts_to<audit_credit_atom, uint64_t>>;

} // namespace castellan
