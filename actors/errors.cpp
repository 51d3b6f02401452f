#include "actors/errors.hpp"

namespace castellan {

std::string to_string(castellan_errc x) {
  switch (x) {
    case castellan_errc::invalid_request:
      return "invalid_request";
    case castellan_errc::no_such_pool:
      return "no_such_pool";
    case castellan_errc::spawn_failed:
      return "spawn_failed";
    case castellan_errc::policy_invalid:
      return "policy_invalid";
    case castellan_errc::no_such_policy:
      return "no_such_policy";
    case castellan_errc::io_failed:
      return "io_failed";
    case castellan_errc::shutting_down:
      return "shutting_down";
    case castellan_errc::busy:
      return "busy";
    case castellan_errc::no_such_session:
      return "no_such_session";
    case castellan_errc::session_ended:
      return "session_ended";
    case castellan_errc::no_such_workspace:
      return "no_such_workspace";
    case castellan_errc::workspace_in_use:
      return "workspace_in_use";
    case castellan_errc::workspace_exists:
      return "workspace_exists";
    case castellan_errc::no_space:
      return "no_space";
    case castellan_errc::workspaces_disabled:
      return "workspaces_disabled";
  }
  return "castellan_errc(" + std::to_string(static_cast<int>(x)) + ")";
}

caf::error make_error(castellan_errc code, std::string what) {
  return caf::make_error(code, std::move(what));
}

caf::error make_error(castellan_errc code, const failure& err) {
  return caf::make_error(code, err.describe());
}

std::string describe(const caf::error& err, const caf::actor_system& sys) {
  const auto& ctx = err.context();
  if (err.category() == caf::detail::error_factory<castellan_errc>::category && ctx.size() == 1
      && ctx.match_element<std::string>(0))
    return ctx.get_as<std::string>(0);
  return sys.render(err);
}

} // namespace castellan
