#pragma once

/// @file syscall_mediator.hpp
/// Decides one seccomp notification of a sandboxed worker against the
/// pool's compiled policy, on the event source thread (no actor round trip).
/// CAF-free: it returns what happened and the event source turns that into
/// messages.
///
/// Open family (open, openat, creat, openat2): the path is copied out of the
/// caller once, made absolute against its cwd or dirfd (as seen inside the
/// sandbox), and opened by the supervisor itself with openat2
/// (RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS) from the worker's root, first
/// as O_PATH. The decision is taken on the path of the object actually
/// opened (symlinks resolved); the caller gets a reopen of that very object
/// with its own flags, injected with SECCOMP_IOCTL_NOTIF_ADDFD. The caller's
/// buffer is never read again, so flipping it changes nothing.
///   - reads (read_file, read_dir only) are optimistic: a denial is not an
///     errno but the end of the worker (killed before the answer, so the
///     file never reaches it);
///   - writes, truncations and creations are synchronous: a denial answers
///     EACCES and the process continues.
/// exec family (execve, execveat): decided on the copied path, lexically
/// and after resolution; allowed calls continue in the kernel (see
/// docs/security.md for why that is safe only with Landlock's EXECUTE
/// rights behind it).

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "actors/exec_messages.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan {

/// One worker as the mediator sees it.
struct mediated_worker {
  uint64_t id = 0;
  int pidfd = -1;        ///< not owned (the pool's)
  int control_fd = -1;   ///< not owned: denial details go here for the harness
  std::unique_ptr<platform::notify_listener> listener;
  unique_fd root;        ///< the sandbox's root directory, opened at the first notification
  uid_t fsuid = 0;       ///< the worker's kernel uid/gid: DAC checks are made as it
  gid_t fsgid = 0;
  bool killed = false;   ///< an optimistic check failed: ignore the rest
};

/// What one notification came to.
struct mediation_result {
  enum class outcome : uint8_t { allow, deny, warn, kill, gone };
  outcome what = outcome::allow;
  int32_t errno_value = 0;    ///< deny: what the caller got
  policy_event event;         ///< for deny, warn and kill
  uint64_t latency_ns = 0;    ///< from receive to answer
};

class syscall_mediator {
public:
  explicit syscall_mediator(std::shared_ptr<const policy::compiled_policy> policy);

  /// Receives and decides one pending notification of `w`. Nothing when
  /// there was none (EAGAIN) or the caller went away before it was read.
  std::optional<mediation_result> handle(mediated_worker& w);

  /// Replaces the policy for the next decisions (called on the same thread).
  void set_policy(std::shared_ptr<const policy::compiled_policy> policy) {
    policy_ = std::move(policy);
  }
  const policy::compiled_policy& policy() const noexcept { return *policy_; }

private:
  struct call;
  void decide_open(mediated_worker& w, call& c, mediation_result& r);
  void decide_exec(mediated_worker& w, call& c, mediation_result& r);
  void send_denial_detail(const mediated_worker& w, const policy_event& e, int err) const;
  void use_credentials_of(const mediated_worker& w);

  std::shared_ptr<const policy::compiled_policy> policy_;
  uid_t current_fsuid_ = static_cast<uid_t>(-1);
  gid_t current_fsgid_ = static_cast<gid_t>(-1);
};

/// The system call names the notify filter must list for `policy`, and
/// whether opens for reading can stay out of it. Empty when the policy has
/// nothing the static layers (mounts, Landlock, the anti-escape filter)
/// cannot decide themselves: such a policy costs nothing per call.
platform::notify_spec notify_spec_for(const policy::policy_document& doc);

} // namespace castellan
