#include "actors/actor_system_setup.hpp"

#include <chrono>

#include "actors/messages.hpp"

namespace castellan {

void prepare_actor_system_config(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::castellan>();
  // Latency, not throughput, is what the exec path needs from the scheduler.
  // CAF's work-stealing workers, once idle, poll in a "moderate" phase that
  // sleeps 50 us between attempts (100 us with the kernel's timer slack): a
  // message from a thread outside the scheduler — a requester, the pool's
  // event source — would wait out that sleep at every hop. Without the sleep
  // the moderate phase is a short spin, after which an idle worker blocks on
  // its condition variable, which an external enqueue notifies at once.
  cfg.set("work-stealing.moderate-sleep-duration", caf::timespan{0});
}

} // namespace castellan
