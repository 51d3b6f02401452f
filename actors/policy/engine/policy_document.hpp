#pragma once

/// @file policy_document.hpp
/// A policy as data: what one file says (or, after `extends` and merging,
/// what a stack of files says together). Absent fields stay absent
/// (`std::optional`) so that merging can tell "no opinion" from a value; the
/// effective_* accessors give the value that applies.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/action.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/policy/engine/net_proto.hpp"
#include "actors/policy/engine/ports.hpp"

namespace castellan::policy {

/// One enforcement layer: `true`/`false`, or `{"enabled", "best_effort"}`
/// where best_effort lets a worker start when the kernel lacks the layer.
struct plugin_setting {
  bool enabled = true;
  bool best_effort = false;
  bool object_form = false; ///< written as an object (kept when printing)
};

struct plugins_section {
  std::optional<plugin_setting> namespaces;
  std::optional<plugin_setting> landlock;
  std::optional<plugin_setting> seccomp;
  /// The per-worker cgroup (memory, pids, CPU limits and per-exec usage).
  /// best_effort lets a worker start without one where the supervisor may
  /// not create cgroups (rootless without a delegated subtree).
  std::optional<plugin_setting> cgroups;
};

/// The action for operations no rule matches, per domain. Absent = deny.
struct defaults_section {
  std::optional<action> fs;
  std::optional<action> net;
  std::optional<action> exec;
};

struct fs_rule {
  action verdict = action::deny;
  std::string path;                    ///< normalised pattern ("/tmp", "/usr/lib/**")
  std::vector<std::string> perm_names; ///< as written (for printing)
  fs_access perms = 0;                 ///< expanded mask
  std::string origin;                  ///< "file#/fs/rules/0": where it was written
};

struct net_rule {
  action verdict = action::deny;
  net_proto proto = net_proto::tcp;
  cidr_block cidr;
  std::string cidr_text; ///< canonical form
  std::vector<port_range> ports;
  std::string ports_text; ///< as written
  std::string origin;
};

/// Host name lists. An allow list that is present (even empty) restricts
/// named connections to its hosts; the deny list always wins.
struct net_hosts {
  std::optional<std::vector<std::string>> allow; ///< normalised patterns
  std::vector<std::string> deny;                 ///< normalised patterns
  std::vector<std::string> allow_origins;        ///< parallel to *allow
  std::vector<std::string> deny_origins;         ///< parallel to deny
};

struct exec_rule {
  action verdict = action::deny;
  std::string path;                  ///< normalised pattern
  std::optional<std::string> sha256; ///< 64 lower-case hex digits
  std::string origin;
};

struct audit_section {
  std::optional<bool> enabled;
  std::vector<std::string> events;
};

/// Resource limits. Absent = the pool's own default.
struct limits_section {
  std::optional<uint64_t> timeout_ms;
  std::optional<uint64_t> memory_bytes;
  std::optional<uint64_t> pids;
  std::optional<uint64_t> cpu_percent;
  std::optional<uint64_t> stdout_bytes;
  std::optional<uint64_t> stderr_bytes;
  std::optional<uint64_t> code_bytes;
};

struct policy_document {
  int version = 1;
  std::string description;
  std::vector<std::string> extends; ///< empty once resolved
  plugins_section plugins;
  defaults_section defaults;
  std::vector<fs_rule> fs_rules;
  std::vector<net_rule> net_rules;
  net_hosts hosts;
  std::vector<exec_rule> exec_rules;
  std::vector<std::string> deny_syscalls;
  audit_section audit;
  limits_section limits;
  std::string source; ///< the file it came from (the top file once merged)

  action effective_fs_default() const noexcept { return defaults.fs.value_or(action::deny); }
  action effective_net_default() const noexcept { return defaults.net.value_or(action::deny); }
  action effective_exec_default() const noexcept { return defaults.exec.value_or(action::deny); }
  /// A plugin that no policy mentions is enabled and strict (fail closed).
  static plugin_setting effective(const std::optional<plugin_setting>& p) noexcept {
    return p.value_or(plugin_setting{});
  }
};

/// The policy as JSON in schema order, omitting absent fields; valid against
/// the schema and equivalent to `doc` (extends included if not resolved).
nlohmann::ordered_json to_json(const policy_document& doc);

} // namespace castellan::policy
