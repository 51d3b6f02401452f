#include "actors/pool/pool_spec.hpp"

#include "actors/errors.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/policy_messages.hpp"

namespace castellan {

const char* to_string(exec_mode m) noexcept {
  switch (m) {
    case exec_mode::isolated:
      return "isolated";
    case exec_mode::shared:
      return "shared";
    case exec_mode::session:
      break;
  }
  return "session";
}

bool from_string(std::string_view text, exec_mode& out) noexcept {
  if (text == "isolated")
    out = exec_mode::isolated;
  else if (text == "shared")
    out = exec_mode::shared;
  else
    return false;
  return true;
}

policy_wire_form to_wire_form(const std::shared_ptr<const policy::compiled_policy>& policy) {
  if (!policy)
    return {};
  return {policy->name(), policy->revision(), policy->json_text()};
}

caf::error from_wire_form(const policy_wire_form& wire,
                          std::shared_ptr<const policy::compiled_policy>& out) {
  // The same validation as a snapshot from a peer: one way in for a policy
  // that arrives as text.
  policy_snapshot snapshot;
  if (auto err = restore_policy_snapshot(snapshot, wire.name, wire.revision, wire.json_text))
    return err;
  out = std::move(snapshot.policy);
  return caf::none;
}

caf::error check_received_pool_spec(const pool_spec& x) {
  if (x.mode != exec_mode::isolated && x.mode != exec_mode::shared &&
      x.mode != exec_mode::session)
    return make_error(castellan_errc::invalid_request,
                      "pool spec " + x.name + ": unknown exec mode " +
                          std::to_string(static_cast<unsigned>(x.mode)));
  if (x.isolation != platform::isolation_mode::none &&
      x.isolation != platform::isolation_mode::namespaces)
    return make_error(castellan_errc::invalid_request,
                      "pool spec " + x.name + ": unknown isolation " +
                          std::to_string(static_cast<unsigned>(x.isolation)));
  return caf::none;
}

} // namespace castellan
