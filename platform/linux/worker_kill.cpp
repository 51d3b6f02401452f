#include "platform/linux/worker_kill.hpp"

#include <signal.h>

#include "platform/linux/cgroups.hpp"
#include "platform/linux/pidfd.hpp"

namespace castellan::platform {

std::string worker_kill_report::describe() const {
  std::string out;
  auto add = [&](const std::string& part) { out += (out.empty() ? "" : " + ") + part; };
  if (std::string(cgroup_method) != "none")
    add(std::string(cgroup_method) +
        (cgroup_tasks ? " (" + std::to_string(cgroup_tasks) + " tasks)" : std::string()));
  if (!cgroup_error.empty())
    add("cgroup failed: " + cgroup_error);
  if (init_signalled)
    add("worker init");
  if (group_signalled)
    add("process group");
  return out.empty() ? "nothing to kill" : out;
}

worker_kill_report kill_worker_tree(const worker_kill_target& target) noexcept {
  worker_kill_report report;
  const bool namespace_first = target.init_owns_pid_namespace && target.init_pidfd >= 0;
  if (namespace_first)
    report.init_signalled = static_cast<bool>(pidfd_signal(target.init_pidfd, SIGKILL));
  if (target.cgroup != nullptr) {
    // Behind a dying namespace init nothing can fork any more: no freezer.
    auto pass = target.cgroup->signal_all(!report.init_signalled);
    if (pass) {
      report.cgroup_method = pass->method;
      report.cgroup_tasks = pass->tasks;
    } else {
      try {
        report.cgroup_error = pass.error().describe();
      } catch (...) {
      }
    }
  }
  if (target.init_pidfd >= 0 && !namespace_first)
    report.init_signalled = static_cast<bool>(pidfd_signal(target.init_pidfd, SIGKILL));
  // A negative pid names the group; the group leader's pid is the group id.
  if (target.process_group > 0)
    report.group_signalled = ::kill(-target.process_group, SIGKILL) == 0;
  return report;
}

} // namespace castellan::platform
