#pragma once

/// @file policy_messages.hpp
/// The messages of the policy actor (actors/policy/policy_actor.hpp): compiled
/// snapshots, check requests and their decisions, and the notifications sent
/// to subscribers when a policy is (re)loaded or refused. Plain structs with
/// `inspect()`; registered in actors/messages.hpp.

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <caf/error.hpp>
#include <caf/meta/load_callback.hpp>
#include <caf/meta/type_name.hpp>

#include "actors/policy/engine/compiled_policy.hpp"

namespace castellan {

/// A shared, immutable compiled policy. Copying it copies a pointer: every
/// holder (a pool, its event-source thread, a worker hook) reads the same
/// snapshot without locks, and a reload publishes a new one instead of
/// changing this one. Serialised across nodes as the effective policy's JSON,
/// which the receiving node validates and compiles again.
struct policy_snapshot {
  std::shared_ptr<const policy::compiled_policy> policy;

  explicit operator bool() const noexcept { return policy != nullptr; }
  const policy::compiled_policy* operator->() const noexcept { return policy.get(); }
  const policy::compiled_policy& operator*() const noexcept { return *policy; }
};

/// Rebuilds a snapshot from its serialised form (validated like a file).
caf::error restore_policy_snapshot(policy_snapshot& x, const std::string& name, uint64_t revision,
                                   const std::string& json_text);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_snapshot& x) {
  std::string name;
  uint64_t revision = 0;
  std::string json_text;
  if constexpr (Inspector::reads_state) {
    if (x.policy) {
      name = x.policy->name();
      revision = x.policy->revision();
      json_text = x.policy->json_text();
    }
  }
  auto load = [&]() -> caf::error { return restore_policy_snapshot(x, name, revision, json_text); };
  return f(caf::meta::type_name("policy_snapshot"), name, revision, json_text,
           caf::meta::load_callback(load));
}

/// Asks whether `access` (fs_perm bits, see engine/fs_access.hpp) may be
/// exercised on `path` under the named policy.
struct fs_check {
  std::string policy;
  std::string path;
  uint32_t access = 0;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, fs_check& x) {
  return f(caf::meta::type_name("fs_check"), x.policy, x.path, x.access);
}

/// Asks whether a connection may be made. `host` is the name the code asked
/// for (empty when it connected to a bare address).
struct net_check {
  std::string policy;
  std::string proto;   ///< "tcp" or "udp"
  std::string address; ///< IPv4 or IPv6, textual
  uint16_t port = 0;
  std::string host;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, net_check& x) {
  return f(caf::meta::type_name("net_check"), x.policy, x.proto, x.address, x.port, x.host);
}

/// Asks whether `path` may be executed; `sha256` when the caller knows it.
struct exec_check {
  std::string policy;
  std::string path;
  std::string sha256;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, exec_check& x) {
  return f(caf::meta::type_name("exec_check"), x.policy, x.path, x.sha256);
}

/// The answer to a check, explainable: which rule decided, where it was written.
struct policy_decision {
  std::string policy;    ///< the policy that answered
  uint64_t revision = 0; ///< its revision (counts accepted reloads)
  std::string action;    ///< "allow", "warn" or "deny"
  std::string rule;      ///< JSON pointer of the deciding entry, "default" or "invalid"
  std::string origin;    ///< "file#pointer" where that rule was written (rules only)
  std::string
      source; ///< "rule", "default", "host_deny", "host_allow", "host_not_allowed", "invalid"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_decision& x) {
  return f(caf::meta::type_name("policy_decision"), x.policy, x.revision, x.action, x.rule,
           x.origin, x.source);
}

/// Builds the message form of an engine decision of `snapshot`.
policy_decision make_policy_decision(const policy::compiled_policy& snapshot,
                                     const policy::decision& d);

/// Sent to subscribers when a policy file was refused at load or reload. The
/// previously loaded version (if any) stays in force.
struct policy_rejected {
  std::string policy_name;
  std::string path;
  std::vector<std::string> errors; ///< "file: pointer: value: reason" each
  int64_t timestamp_ns = 0;        ///< CLOCK_REALTIME
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_rejected& x) {
  return f(caf::meta::type_name("policy_rejected"), x.policy_name, x.path, x.errors,
           x.timestamp_ns);
}

/// Sent to subscribers when a policy was loaded or changed: the new snapshot.
struct policy_updated {
  std::string policy_name;
  std::string path;
  uint64_t revision = 0;
  policy_snapshot snapshot;
  int64_t timestamp_ns = 0; ///< CLOCK_REALTIME
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_updated& x) {
  return f(caf::meta::type_name("policy_updated"), x.policy_name, x.path, x.revision, x.snapshot,
           x.timestamp_ns);
}

/// What the policy actor holds: the loaded policies ("name@revision") and the
/// files currently refused. Reply to status and to an explicit reload.
struct policy_status {
  std::string directory;
  std::vector<std::string> loaded;
  std::vector<policy_rejected> rejected;
};

template <class Inspector> typename Inspector::result_type inspect(Inspector& f, policy_status& x) {
  return f(caf::meta::type_name("policy_status"), x.directory, x.loaded, x.rejected);
}

/// A change in the policy directory, from the watcher thread (internal).
struct policy_file_event {
  std::string file_name; ///< relative to the directory; empty: rescan everything
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, policy_file_event& x) {
  return f(caf::meta::type_name("policy_file_event"), x.file_name);
}

} // namespace castellan
