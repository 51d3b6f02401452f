#pragma once

/// @file cgroup_subtree.hpp
/// One cgroup subtree per supervisor process, and the reclaim of the
/// subtrees that supervisors killed with SIGKILL left behind.
///
/// A supervisor's worker cgroups live below `<own>/castellan/<id>` in every
/// hierarchy it uses (`<own>` is the supervisor's own cgroup there), where
/// `<id>` = "<pid>-<start time>-<pid namespace inode>" names the supervisor
/// process: the start time (field 22 of /proc/<pid>/stat, clock ticks since
/// boot) tells a reused pid from the supervisor that had it. The subtree is
/// removed when its owner ends normally (the destructor, in the creating
/// process only); a supervisor that cannot run its destructors leaves it,
/// and the next supervisor that starts below the same cgroup reclaims it.
///
/// What reclaim_dead_subtrees removes, and nothing else:
/// - directories directly below `<own>/castellan/` whose name parses exactly
///   as an id (anything else there is foreign and left alone),
/// - of the reclaimer's own pid namespace (a pid means nothing in another
///   one: those subtrees are left alone and reported),
/// - whose process is gone: no /proc/<pid>, or one with another start time
///   (a zombie still counts as alive until it is reaped),
/// - never the reclaimer's own,
/// and only when this process's /proc shows its own pid namespace. Tasks left
/// in such a subtree are killed before the rmdir, depth first: v1 freezers
/// are thawed (a frozen task acts on SIGKILL only when thawed), every pid
/// listed in cgroup.procs gets SIGKILL through a pidfd opened first and the
/// pid is signalled only if it is still listed after the pidfd was opened (a
/// pid recycled by an unrelated process in between is never signalled).

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/linux/cgroups.hpp"

namespace castellan::platform {

/// Who owns a subtree: a process, told apart from a later one with its pid.
struct supervisor_id {
  pid_t pid = 0;
  uint64_t start_time = 0; ///< /proc/<pid>/stat field 22
  uint64_t pid_ns = 0;     ///< inode of /proc/<pid>/ns/pid

  /// "<pid>-<start time>-<pid namespace inode>".
  std::string name() const;
  /// The id a directory name stands for; nothing unless `name` is exactly
  /// what name() writes.
  static std::optional<supervisor_id> parse(const std::string& name);
  /// This process.
  static outcome<supervisor_id> self();
};

/// The start time of `pid` from /proc/<pid>/stat; nothing when there is no
/// such process; a failure when /proc could not be read for another reason.
outcome<std::optional<uint64_t>> process_start_time(pid_t pid);

/// What one reclaim pass did.
struct cgroup_reclaim_report {
  std::vector<std::string> reclaimed; ///< ids whose subtrees were removed
  std::vector<std::string> live;      ///< ids of supervisors still running (left alone)
  std::vector<std::string> foreign;   ///< entries left alone: "name (why)"
  std::vector<std::string> failed;    ///< "id: why" (tried again at the next start)
  std::size_t tasks_killed = 0;       ///< leftover tasks sent SIGKILL
};

/// Reclaims the subtrees of supervisors that are gone (see the file
/// comment) below `layout`'s own cgroups. `self` is never touched.
outcome<cgroup_reclaim_report> reclaim_dead_subtrees(
  const cgroup_layout& layout, const supervisor_id& self,
  std::chrono::milliseconds timeout = std::chrono::seconds(5));

/// This supervisor's subtree in every hierarchy of a layout.
class cgroup_subtree {
public:
  /// Creates `<own>/castellan/<id.name()>` in every hierarchy (and
  /// `<own>/castellan` when missing; on v2 enabling the layout's v2
  /// controllers for the children of each level). An existing subtree of
  /// that name is an error: never adopt a directory this process did not make.
  static outcome<cgroup_subtree> create(const cgroup_layout& layout, const supervisor_id& id);

  cgroup_subtree(cgroup_subtree&& other) noexcept;
  cgroup_subtree& operator=(cgroup_subtree&& other) = delete;
  cgroup_subtree(const cgroup_subtree&) = delete;
  cgroup_subtree& operator=(const cgroup_subtree&) = delete;
  /// remove(), in the process that created it only (a forked child that
  /// exits normally must not take its parent's subtree with it).
  ~cgroup_subtree();

  /// The layout whose own cgroups are this subtree: worker_cgroup::create
  /// below it.
  const cgroup_layout& layout() const noexcept { return below_; }
  const std::string& name() const noexcept { return name_; }
  /// The subtree's directory in each hierarchy.
  const std::vector<std::string>& directories() const noexcept { return dirs_; }

  /// Kills any task left below, removes the subtree's directories and then
  /// `<own>/castellan` where it is empty (another supervisor's subtree keeps
  /// it).
  outcome<void> remove(std::chrono::milliseconds timeout = std::chrono::seconds(2));

private:
  cgroup_subtree() = default;

  cgroup_layout below_;
  std::string name_;
  std::vector<std::string> dirs_;    ///< <own>/castellan/<name>, one per hierarchy
  std::vector<std::string> parents_; ///< <own>/castellan
  pid_t owner_ = 0;                  ///< the creating process
};

} // namespace castellan::platform
