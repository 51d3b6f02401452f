#pragma once

/// @file api_service.hpp
/// castellan's HTTP/JSON API: the server (http_server), the routes, and the
/// api_actor in front of a supervisor; and the drain that `castellan serve`
/// runs on SIGTERM (docs/api.md).

#include <chrono>
#include <cstddef>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <caf/actor_system.hpp>

#include "actors/api/access_control.hpp"
#include "actors/api/http_server.hpp"
#include "actors/api/listen_address.hpp"
#include "actors/api/tls_settings.hpp"
#include "actors/supervisor/supervisor_actor.hpp"
#include "ipc/outcome.hpp"

namespace castellan::api {

struct api_options {
  std::vector<listen_address> listen;
  http_limits limits;
  /// Who may connect to the unix sockets.
  unix_socket_access socket_access;
  /// What the `tls:` listeners present (needed when there is one).
  tls_files tls;
  /// The tokens file's entries; nullopt: no tokens file. With one, every
  /// TCP request needs a valid token (docs/api.md, "Authentication").
  std::optional<std::vector<token_entry>> tokens;
  /// The pool a request that names none runs on (the config's first): a
  /// token's allowlist is checked against it.
  std::string default_pool = "default";
  /// Where `POST /v1/policies/…` resolve policy names (`name`, `extends`):
  /// the daemon's policy directory; empty: the install layout's policies/.
  std::string policy_dir;
  /// The policy each pool follows by name in the policy directory (pool
  /// name → policy name; a pool whose policy is a file by path has none):
  /// a token limited to some pools names only its pools' policies
  /// (policy_scope.hpp).
  std::map<std::string, std::string> pool_policies;
  /// The audit file sink (the supervisor's audit_config::file), which
  /// `GET /v1/audit?since=…` reads back; an empty path: none.
  file_sink_config audit_file;
};

class api_service {
public:
  /// Starts the server on every listener of `opts`, serving `supervisor`.
  static outcome<std::unique_ptr<api_service>> start(caf::actor_system& sys,
                                                     supervisor_actor supervisor, api_options opts);
  ~api_service();

  api_service(const api_service&) = delete;
  api_service& operator=(const api_service&) = delete;

  /// The listeners as bound.
  const std::vector<listen_address>& bound() const;

  /// Stops admitting execs: from now on `POST /v1/exec` and `/v1/run` are
  /// answered 503 `draining` and `/v1/health` says `draining`. Execs in
  /// flight go on. Thread-safe.
  void begin_drain();

  /// Waits (blocking the caller: not for an actor or the I/O thread) until
  /// no exec is in flight, or `grace` has passed; true when none is.
  bool wait_idle(std::chrono::milliseconds grace);

  /// Cancels every exec in flight (each is still answered, `cancelled`).
  /// Returns how many it cancelled.
  std::size_t cancel_in_flight();

  /// Execs in flight (admitted, not yet answered).
  std::size_t in_flight() const;

  /// Where a request that names no pool runs from now on (a reloaded config
  /// made another pool the first). Thread-safe.
  void set_default_pool(std::string name);

  /// The pools were reconfigured (a reload): their policies by name, as
  /// api_options::pool_policies. Thread-safe.
  void set_pool_policies(std::map<std::string, std::string> pool_policies);

  /// The tokens file was read again (a reload): its entries decide every
  /// request from now on; execs in flight stay counted against their
  /// token (access_control::replace). Thread-safe.
  void replace_tokens(std::vector<token_entry> tokens);

  /// Closes the listeners and connections, removes the unix sockets and
  /// stops the api_actor. Idempotent.
  void stop();

  struct state;

private:
  api_service() = default;
  std::shared_ptr<state> state_;
};

} // namespace castellan::api
