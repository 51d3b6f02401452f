#pragma once

/// @file pool_spec.hpp
/// What a pool is, as data: its size, limits, interpreter, sandbox and the
/// policy it follows, without any actor handle. A pool_spec can be copied,
/// compared as bytes and sent to another node; pool_config (pool_actor.hpp)
/// adds the handles a running pool talks to. CAF-free but for `inspect()`,
/// which only needs CAF's meta headers (like policy_messages.hpp).

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/pool/sandbox_profile.hpp"
#include "platform/worker_spec.hpp"

namespace castellan {

/// How a pool's workers run each exec: isolated and shared are stateless;
/// session keeps state on purpose, for the one pool of a session.
enum class exec_mode : uint8_t {
  isolated, ///< the default: a warm, pre-imported zygote forks a fresh child per
            ///< exec, in a Landlock domain of its own, and puts /tmp, /dev/shm and
            ///< IPC back after it (docs/security.md: what execs still share)
  shared,   ///< the warm interpreter itself runs each exec in a fresh globals
            ///< namespace: fastest, but execs share the interpreter's state, so
            ///< only for a pool whose requesters are one trust domain
  session,  ///< a session's worker (actors/session): every exec in the same
            ///< __main__, the environment and cwd as the last exec left them;
            ///< a worker that leaves threads or processes running is kept
};

/// "isolated" / "shared" / "session".
const char* to_string(exec_mode m) noexcept;
/// Parses "isolated" / "shared"; false if neither (a session's mode is set
/// by the session, never read from a configuration).
bool from_string(std::string_view text, exec_mode& out) noexcept;

/// How a pool is set up, as data. The defaults are what `castellan exec` uses.
struct pool_spec {
  std::string name = "default";
  uint32_t size = 4;           ///< warm workers kept
  uint32_t queue_limit = 256;  ///< queued requests beyond which `busy` is answered
  std::string python = "/usr/bin/python3";
  std::string worker_binary;   ///< castellan-worker (empty: find_install_layout)
  std::string harness;         ///< castellan_harness.py (empty: find_install_layout)
  /// Sandboxed workers start warm: cloned by the pool's launcher
  /// (castellan-launcher, an interpreter with the harness loaded) into their
  /// new sandbox, instead of exec'ing castellan-worker and then Python. The
  /// sandbox is the same; the workers of the pool share the launcher's
  /// address-space layout and str hash secret (platform/linux/worker_launcher.hpp).
  bool warm_start = false;
  std::string launcher_binary; ///< castellan-launcher (empty: beside worker_binary)
  uint32_t ring_capacity = 1u << 20; ///< bytes per direction
  uint64_t stdout_limit = 4u << 20;  ///< bytes kept; the rest is dropped and flagged
  uint64_t stderr_limit = 4u << 20;
  uint64_t code_limit = 512u << 10;  ///< larger code is refused (limit_exceeded)
  uint64_t default_timeout_ms = 30000;
  uint32_t recycle_after = 0;        ///< execs per worker before replacement (0: never)
  exec_mode mode = exec_mode::isolated; ///< how each exec runs in a worker
  bool worker_stderr = false;        ///< pass workers' own diagnostics to our stderr
  /// How workers are isolated: the Linux sandbox (namespaces, root, Landlock,
  /// seccomp, a cgroup per worker) by default; `none` (plain processes) only
  /// for the portable backend and development.
  platform::isolation_mode isolation = platform::isolation_mode::namespaces;
  /// Per-worker cgroup limits (0 = that one unlimited); sandboxed workers only.
  platform::resource_limits limits{256ull << 20, 32, 100};
  /// What the sandbox contains and enforces (from the policy).
  sandbox_profile sandbox;
  std::string policy_name = "default"; ///< names the policy in audit records
  /// With an egress policy and a proxy (pool_config), every sandboxed worker
  /// gets the egress relay on 127.0.0.1:egress_port.
  uint16_t egress_port = 3128;
  /// Events kept in one exec's result; beyond it they go to audit only.
  uint32_t events_limit = 256;

  // -- the pool's policy (actors/policy) ---------------------------------------
  /// The policy spawn_pool applies over the rest of this spec
  /// (pool_config_under), and the pool again at each reload announced by
  /// pool_config::policies. Null: the spec is used as given (a caller that
  /// applied a policy itself, or a pool without one). Crosses nodes as its
  /// name, revision and effective JSON text, compiled again on arrival.
  std::shared_ptr<const policy::compiled_policy> policy;
  /// The name of a policy of the supervisor's policy directory
  /// (supervisor_config::policies): the supervisor sets `policy` and
  /// pool_config::policies from it. Empty: none.
  std::string named_policy;
};

/// A compiled policy as it crosses nodes: what policy_snapshot sends.
/// Empty `json_text`: no policy.
struct policy_wire_form {
  std::string name;
  uint64_t revision = 0;
  std::string json_text;
};

/// The wire form of `policy` (all empty when it is null).
policy_wire_form to_wire_form(const std::shared_ptr<const policy::compiled_policy>& policy);

/// The policy a peer sent, validated like a policy file and compiled again
/// (null for an empty text); an error for a text that does not validate.
caf::error from_wire_form(const policy_wire_form& wire,
                          std::shared_ptr<const policy::compiled_policy>& out);

/// Checks what a deserialised spec holds beyond its types: enumerations in
/// range (a peer's bytes can name any value).
caf::error check_received_pool_spec(const pool_spec& x);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, sandbox_extra_path& x) {
  return f(caf::meta::type_name("sandbox_extra_path"), x.path, x.writable, x.landlock_access);
}

/// Every field of the spec, the sandbox's included. The sandbox's fs policy is
/// most often the pool's policy itself; it is then sent once.
template <class Inspector> typename Inspector::result_type inspect(Inspector& f, pool_spec& x) {
  policy_wire_form policy;
  policy_wire_form fs_policy;
  bool fs_policy_is_policy = false;
  if constexpr (Inspector::reads_state) {
    policy = to_wire_form(x.policy);
    fs_policy_is_policy = x.policy && x.sandbox.fs_policy == x.policy;
    if (!fs_policy_is_policy)
      fs_policy = to_wire_form(x.sandbox.fs_policy);
  }
  auto load = [&]() -> caf::error {
    if (auto err = check_received_pool_spec(x))
      return err;
    if (auto err = from_wire_form(policy, x.policy))
      return err;
    if (fs_policy_is_policy) {
      x.sandbox.fs_policy = x.policy;
      return caf::none;
    }
    return from_wire_form(fs_policy, x.sandbox.fs_policy);
  };
  auto& s = x.sandbox;
  return f(caf::meta::type_name("pool_spec"), x.name, x.size, x.queue_limit, x.python,
           x.worker_binary, x.harness, x.warm_start, x.launcher_binary, x.ring_capacity,
           x.stdout_limit, x.stderr_limit, x.code_limit, x.default_timeout_ms, x.recycle_after,
           x.mode, x.worker_stderr, x.isolation, x.limits.memory_bytes, x.limits.pids,
           x.limits.cpu_percent, s.landlock, s.landlock_best_effort, s.seccomp, s.cgroups,
           s.cgroups_best_effort, s.deny_syscalls, s.kill_syscalls, s.extra_paths, s.masked_paths,
           s.restrict_execute, s.exec_allowed, s.notify.syscalls, s.notify.open_writes_only,
           s.loopback, s.hostname, s.tmp_size_bytes, s.workspace_source, s.overlay_writes, x.policy_name, x.egress_port,
           x.events_limit, policy.name, policy.revision, policy.json_text, fs_policy_is_policy,
           fs_policy.name, fs_policy.revision, fs_policy.json_text, x.named_policy,
           caf::meta::load_callback(load));
}

} // namespace castellan
