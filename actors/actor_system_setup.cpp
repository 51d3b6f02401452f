#include "actors/actor_system_setup.hpp"

#include "actors/messages.hpp"

namespace castellan {

void prepare_actor_system_config(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::castellan>();
}

} // namespace castellan
