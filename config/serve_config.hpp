#pragma once

/// @file serve_config.hpp
/// The daemon's configuration as data: what config_loader.hpp reads from a
/// castellan.toml and checks, and what to_supervisor_config
/// (supervisor_setup.hpp) turns into the actor tree's configuration.
/// docs/config.md describes every key.

#include <cstdint>
#include <string>
#include <vector>

#include "actors/api/access_control.hpp"
#include "actors/audit/audit_messages.hpp"
#include "actors/policy/policy_actor.hpp"
#include "actors/pool/pool_spec.hpp"
#include "actors/proxy/egress_limits.hpp"
#include "actors/session/session_limits.hpp"
#include "actors/supervisor/request_policy.hpp"
#include "platform/install_layout.hpp"

namespace castellan::config {

/// One `[[pools]]` entry.
struct pool_entry {
  /// Everything but the policy: name, size, mode, limits… pool_spec's
  /// defaults (what `castellan exec` uses) where the file says nothing.
  pool_spec spec;
  /// The policy as written: a policy of the policy directory by name
  /// ("strict"), or a policy file by path ("./mine.json").
  std::string policy = platform::default_policy_name;
  /// True when `policy` is a name: the pool then follows that policy's
  /// reloads through the policy actor. A file is read once, at start.
  bool policy_is_name = true;
  /// The file `policy` names: `<policies.dir>/<name>.json`, or the path made
  /// absolute against the config file's directory.
  std::string policy_file;
};

/// `[auth]`: the API's clients (docs/api.md, "Authentication").
struct auth_settings {
  /// The bearer tokens file (absolute, or empty: none): readable by its
  /// owner only, loaded into `tokens`.
  std::string tokens_file;
  /// Its tokens (none without a tokens file, or with an empty one).
  std::vector<api::token_entry> tokens;
  /// The unix sockets' mode: 0600 (the daemon's user only) or 0660 (and
  /// the members of `socket_group`).
  uint32_t socket_mode = 0600;
  /// The unix sockets' group by name (empty: the daemon's group) and id
  /// (-1: the daemon's group), resolved when the file is checked.
  std::string socket_group;
  int64_t socket_gid = -1;
  /// Plain `tcp:` listeners on loopback are allowed only with this.
  bool allow_plaintext_loopback = false;
};

/// `[tls]`: what `tls:` listeners present (absolute paths, or empty).
struct tls_settings {
  std::string cert_file; ///< the certificate chain, PEM, the server's first
  std::string key_file;  ///< its private key, PEM, readable by its owner only
};

/// `[workspaces]`: the supervisor's workspace store at
/// `<state_dir>/workspaces` (docs/workspaces.md). It needs root: without
/// CAP_SYS_ADMIN, serve starts without workspaces and says so.
struct workspace_settings {
  bool enabled = true;
  uint64_t default_quota_bytes = 256ull << 20; ///< a create that asks for none
  uint64_t max_quota_bytes = 4ull << 30;       ///< the most a create may ask
  uint32_t max_count = 64;                     ///< workspaces in the store
  uint64_t max_total_quota_bytes = 0;          ///< all quotas together (0: no cap)
};

/// A loaded, checked castellan.toml.
struct serve_config {
  std::string source; ///< the file it came from ("<built-in>" for the built-in default)
  /// Where the API listens: "unix:PATH" or "tcp:HOST:PORT" (default: one unix
  /// socket, default_listen_address()).
  std::vector<std::string> listen;
  /// On SIGTERM, how long in-flight execs may run on before they are killed.
  uint64_t drain_grace_ms = 10000;
  /// Where the daemon keeps its state (an absolute path; default_state_dir()).
  std::string state_dir;
  /// The policy directory (absolute; default: the installed pre-built
  /// policies) and whether its files hot-reload.
  policy_config policies;
  /// At least one; the first is the default route.
  std::vector<pool_entry> pools;
  /// The audit actor's configuration; `audit.file.path` is absolute or empty
  /// (no file sink).
  audit_config audit;
  /// The egress proxy's limits.
  proxy::egress_limits egress;
  /// What requests that bring their own policy may ask for.
  policy_pool_config request_policies;
  /// Who may use the API: `[auth]`.
  auth_settings auth;
  /// The certificate and key of `tls:` listeners: `[tls]`.
  tls_settings tls;
  /// How many sessions may exist, and for how long: `[sessions]`.
  session_limits sessions;
  /// The workspace store: `[workspaces]`.
  workspace_settings workspaces;
};

/// "unix:/run/castellan/castellan.sock" for root, else
/// "unix:$XDG_RUNTIME_DIR/castellan.sock" (/run/user/<uid> without it).
std::string default_listen_address();

/// "/var/lib/castellan" for root, else "$XDG_STATE_HOME/castellan"
/// ($HOME/.local/state/castellan without it, /var/lib/castellan without $HOME).
std::string default_state_dir();

} // namespace castellan::config
