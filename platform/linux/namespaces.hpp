#pragma once

/// @file namespaces.hpp
/// Creating a process in new namespaces (clone3), and asking which
/// namespaces a process is in.
///
/// `clone_sandboxed` is the one place where a sandboxed process is born. The
/// start-up is a handshake:
///
///     parent                                  child (new user, pid, … ns)
///     clone3(CLONE_NEW*|CLONE_PIDFD[|CLONE_INTO_CGROUP])
///                                             blocks reading the sync pipe
///     writes setgroups, uid_map, gid_map
///     writes the pid to each cgroup.procs
///     writes one byte to the sync pipe  ───►  [vm.memfd_noexec = 2, pid namespace]
///                                             setgroups(0), setresgid, setresuid
///                                             ambient setup capabilities
///                                             PR_SET_PDEATHSIG, parent check
///                                             sethostname, unshare(CLONE_NEWCGROUP)
///                                             child_main (fds, execve…)
///     reads the status pipe: EOF = started; a record = {step, errno}
///
/// The child side allocates nothing and makes only async-signal-safe calls.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// The CLONE_NEW* flags of `ns`.
uint64_t clone_flags(const namespace_set& ns) noexcept;

/// "user,pid,mount,net,ipc,uts,cgroup" (the names used in reports).
std::vector<std::string> namespace_names(const namespace_set& ns);

/// The namespaces in which `pid` differs from this process (by inode of
/// /proc/<pid>/ns/*): what is actually in force for it.
outcome<namespace_set> namespaces_of(pid_t pid);

/// The step of the child's start-up that failed (reported with its errno).
enum class child_step : uint8_t {
  wait_for_release,
  setgroups,
  setresgid,
  setresuid,
  ambient_capabilities,
  parent_death_signal,
  parent_gone,
  sethostname,
  cgroup_namespace,
  signals,
  fd_plan,
  close_range,
  execve,
  child_main,
};

const char* to_string(child_step step) noexcept;

/// Empties this thread's signal mask (async-signal-safe).
void unblock_all_signals() noexcept;

/// The child's handle on its start-up report.
class sandbox_child {
public:
  explicit sandbox_child(int status_fd) noexcept : status_fd_(status_fd) {}

  /// Reports `err` at `step` to the parent and exits 127.
  [[noreturn]] void fail(child_step step, int err) const noexcept;

  /// For children that do not exec: tells the parent the start-up is done
  /// (closes the status pipe, which exec would otherwise close).
  void started() noexcept;

  /// The status pipe's fd (kept open, close-on-exec, until exec or started()).
  int status_fd() const noexcept { return status_fd_; }

private:
  int status_fd_;
};

/// Runs in the child once it is the sandbox user in its namespaces and
/// cgroups, with every signal blocked (reset the dispositions, then unblock).
/// Must be async-signal-safe when the caller is multi-threaded. Its return
/// value becomes the exit code.
using sandbox_child_main = int (*)(sandbox_child& self, void* arg) noexcept;

struct sandbox_clone_options {
  namespace_set namespaces;     ///< `user` is required
  id_mapping ids;
  cgroup_placement cgroup;
  bool setup_capabilities = true; ///< keep setup_capability_mask() as ambient capabilities
  bool die_with_parent = true;    ///< PR_SET_PDEATHSIG(SIGKILL)
  std::string hostname;           ///< set when non-empty (needs namespaces.uts)
  /// Writes vm.memfd_noexec = 2 for the new pid namespace right after the
  /// release, while the child still has the caller's uid (worker_spec.hpp).
  /// A failure is not the child's to judge: whoever needs it reads it back.
  bool memfd_noexec = false;
  int fd_floor = 3;               ///< the child's start-up pipes are placed at or above this
  /// CLONE_PARENT: the child becomes a child of the caller's parent (a
  /// launcher starting workers for the supervisor that started it: the
  /// supervisor then reaps them, and their death signal follows it). The
  /// caller cannot reap a child it gave up on: it is killed, and the
  /// parent must reap it (`on_cloned` tells whoever must which pid).
  bool sibling = false;
  /// Called in the caller right after clone3 succeeded, with the child's pid.
  std::function<void(pid_t)> on_cloned;
  /// How long the parent waits for exec (or started()) before it kills the
  /// child and reports a time-out.
  std::chrono::milliseconds start_timeout{10'000};
};

struct sandboxed_child {
  pid_t pid = -1;   ///< in the caller's pid namespace
  unique_fd pidfd;
};

/// Starts `child_main(arg)` in new namespaces as described above, or says
/// which step failed and why (the child is killed and reaped then).
outcome<sandboxed_child> clone_sandboxed(const sandbox_clone_options& options,
                                         sandbox_child_main child_main, void* arg);

/// Convenience for callers that may allocate in the child (tests, single-
/// threaded tools): unblocks signals, then runs `fn(child)`; its result is
/// the exit code.
template <class F>
outcome<sandboxed_child> clone_sandboxed(const sandbox_clone_options& options, F& fn) {
  return clone_sandboxed(
    options,
    [](sandbox_child& self, void* arg) noexcept -> int {
      unblock_all_signals();
      return (*static_cast<F*>(arg))(self);
    },
    &fn);
}

/// Worker side: brings the loopback interface of the current network
/// namespace up (needs CAP_NET_ADMIN in its user namespace).
outcome<void> set_loopback_up();

/// Worker side: turns off, in the current network namespace, the ways to
/// TCP that Landlock's TCP rules (ABI 4) do not see (needs CAP_NET_ADMIN
/// over the namespace, so it cannot reach one this process's user
/// namespace does not own; it refuses the namespace of the host's init):
/// - TCP Fast Open (net.ipv4.tcp_fastopen = 0): a sendto/sendmsg with
///   MSG_FASTOPEN connects without the kernel's connect hook; it then fails
///   with EOPNOTSUPP;
/// - MPTCP (net.mptcp.enabled = 0, where the kernel has it): an
///   IPPROTO_MPTCP socket binds and connects unrestricted by those rules;
///   creating one then fails (ENOPROTOOPT).
/// Each value is read back.
outcome<void> close_landlock_tcp_bypasses();

} // namespace castellan::platform
