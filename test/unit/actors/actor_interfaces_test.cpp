/// @file actor_interfaces_test.cpp
/// Clients hold public handles only. Each actor that takes messages from its
/// own parts (kernel events from a pool's event source, timers) keeps them in
/// an internal interface; the handles the spawn functions and the supervisor
/// give out cannot carry them: sending one does not compile, because a typed
/// send checks the message against the handle's signatures, which these
/// checks read.

#include <boost/test/unit_test.hpp>

#include <type_traits>

#include <caf/detail/type_list.hpp>

#include "actors/audit/audit_actor.hpp"
#include "actors/pool/pool_internal.hpp"
#include "actors/supervisor/supervisor_actor.hpp"

using namespace castellan;

namespace {

/// True when a send of `Sig`'s message through `Handle` compiles.
template <class Handle, class Sig>
constexpr bool accepts = caf::detail::tl_contains<typename Handle::signatures, Sig>::value;

template <class Handle, class Internal>
constexpr bool strictly_smaller =
    caf::detail::tl_subset_of<typename Handle::signatures, typename Internal::signatures>::value &&
    !caf::detail::tl_subset_of<typename Internal::signatures, typename Handle::signatures>::value;

} // namespace

BOOST_AUTO_TEST_SUITE(actor_interfaces)

BOOST_AUTO_TEST_CASE(a_pool_handle_carries_no_kernel_event_or_timer) {
  // What spawn_pool and the supervisor's get_pool give out.
  static_assert(std::is_same_v<decltype(spawn_pool(std::declval<caf::actor_system&>(),
                                                   pool_config{})),
                               outcome<pool_actor>>);
  static_assert(strictly_smaller<pool_actor, pool_internal_actor>);
  BOOST_TEST((accepts<pool_actor, caf::replies_to<exec_atom, exec_request>::with<exec_result>>));
  BOOST_TEST((accepts<pool_actor, caf::replies_to<cancel_atom, uint64_t>::with<cancel_reply>>));
  // A client cannot forge a worker's exit, a doorbell, a deadline or a
  // decided call.
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<exited_atom, uint64_t>>));
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<doorbell_atom, uint64_t>>));
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<deadline_atom, uint64_t, uint64_t>>));
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<syscall_denied>>));
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<optimistic_violation>>));
  BOOST_TEST(!(accepts<pool_actor, caf::reacts_to<refill_atom>>));
  // The pool's own event source does hold them.
  BOOST_TEST((accepts<pool_internal_actor, caf::reacts_to<exited_atom, uint64_t>>));
  BOOST_TEST((accepts<pool_internal_actor, caf::reacts_to<syscall_denied>>));
}

BOOST_AUTO_TEST_CASE(the_supervisor_handle_carries_no_pool_event_and_subscribers_are_typed) {
  static_assert(std::is_same_v<decltype(spawn_supervisor(std::declval<caf::actor_system&>(),
                                                         supervisor_config{})),
                               outcome<supervisor_actor>>);
  static_assert(strictly_smaller<supervisor_actor, supervisor_internal_actor>);
  BOOST_TEST(
      (accepts<supervisor_actor, caf::replies_to<get_pool_atom, std::string>::with<pool_actor>>));
  BOOST_TEST(!(accepts<supervisor_actor, caf::reacts_to<worker_state_event>>));
  BOOST_TEST(!(accepts<supervisor_actor, caf::reacts_to<pool_idle_atom, std::string, uint64_t>>));
  // A subscriber is a handle that takes worker_state_event, not any actor.
  BOOST_TEST((accepts<supervisor_actor, caf::reacts_to<subscribe_atom, worker_state_listener>>));
  BOOST_TEST(!(accepts<supervisor_actor, caf::reacts_to<subscribe_atom, caf::actor>>));
  // Pools report to the supervisor through the listener interface alone.
  static_assert(caf::detail::tl_subset_of<worker_state_listener::signatures,
                                          supervisor_internal_actor::signatures>::value);
}

BOOST_AUTO_TEST_CASE(the_audit_handle_carries_no_timer) {
  static_assert(strictly_smaller<audit_actor, audit_internal_actor>);
  BOOST_TEST((accepts<audit_actor, caf::reacts_to<exec_finished>>));
  BOOST_TEST(!(accepts<audit_actor, caf::reacts_to<audit_tick_atom>>));
}

BOOST_AUTO_TEST_SUITE_END()
