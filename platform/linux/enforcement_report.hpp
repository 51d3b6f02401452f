#pragma once

/// @file enforcement_report.hpp
/// What was asked of a worker's sandbox and what is actually in force, layer
/// by layer; attached to results so that an operator can see, e.g., that a
/// kernel without Landlock TCP rules ran a policy without them.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/cgroups.hpp"
#include "platform/linux/landlock.hpp"
#include "platform/linux/root_builder.hpp"
#include "platform/linux/seccomp_filter.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

struct cgroup_enforcement {
  std::string controllers; ///< "memory=v1,pids=v1,cpu=v1,…"
  cgroup_limits requested;
  cgroup_applied_limits in_force;
};

struct enforcement_report {
  std::vector<std::string> namespaces_requested;
  std::vector<std::string> namespaces_in_force;
  /// How the worker's processes came to exist: "exec" (castellan-worker
  /// and Python exec'd in the new namespaces) or "warm" (cloned from the
  /// pool's launcher: it shares the launcher's address-space layout and
  /// str hash secret with the pool's other warm workers).
  std::string start = "exec";
  /// How the worker runs execs: "isolated" (each in a process of its own) or
  /// "shared" (in one interpreter); empty when the pool did not say.
  std::string mode;
  /// "none (private network namespace, loopback only)" or "host" (the pool
  /// says "none (private network namespace, no interface up)" for a
  /// sandbox whose policy leaves its loopback down).
  std::string network = "host";
  std::optional<cgroup_enforcement> cgroup;
  /// Why the worker runs without a cgroup although one was asked for (only
  /// with cgroups best_effort); empty otherwise.
  std::string cgroup_unavailable;
  std::optional<root_report> root;
  bool landlock_requested = false;
  std::optional<landlock_report> landlock;
  bool seccomp_requested = false;
  std::optional<seccomp_report> seccomp;
  std::optional<capabilities_report> capabilities;

  /// One JSON object; absent layers are null.
  std::string to_json() const;
};

/// The root part of a report as JSON, and back (a launched worker's PID 1
/// hands it to its interpreter process, which reports it).
std::string root_report_json(const root_report& root);
outcome<root_report> parse_root_report(std::string_view json);

/// The supervisor's side of the report for a spawned worker: namespaces
/// requested (from `spec`) and in force (read from /proc/<pid>/ns), network.
outcome<enforcement_report> spawn_enforcement(const worker_spec& spec, pid_t pid);

/// The cgroup part: where each controller is, the limits asked and read back.
outcome<cgroup_enforcement> cgroup_enforcement_of(const worker_cgroup& cg,
                                                  const cgroup_limits& requested);

} // namespace castellan::platform
