#pragma once

/// @file sandbox_setup.hpp
/// castellan-worker as PID 1 of a sandbox: reads the sealed sandbox spec,
/// builds the root, brings loopback up and drops its own capabilities; the
/// interpreter child then drops capabilities, applies Landlock and seccomp to
/// itself and execs Python. Each layer that is requested and cannot be
/// applied ends the worker with its own exit code, one stderr line and one
/// record on PID 1's status pipe, which is what the supervisor reads (fail
/// closed); what is in force reaches the harness in CASTELLAN_ENFORCEMENT,
/// which it reports in READY.

#include <optional>
#include <string>

#include "ipc/outcome.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/root_builder.hpp"
#include "platform/linux/sandbox_spec.hpp"
#include "worker/egress_relay.hpp"

namespace castellan::worker {

/// castellan-worker's exit codes for a sandbox layer that failed.
constexpr int exit_sandbox_spec = 3;         ///< the spec fd is unreadable or invalid
constexpr int exit_sandbox_root = 4;         ///< build_root failed
constexpr int exit_sandbox_network = 5;      ///< loopback or the egress relay could not be set up
constexpr int exit_sandbox_capabilities = 6; ///< capabilities could not be dropped
constexpr int exit_sandbox_landlock = 7;     ///< Landlock could not be applied
constexpr int exit_sandbox_seccomp = 8;      ///< the seccomp filter could not be loaded
constexpr int exit_sandbox_notify = 9;       ///< the notify filter could not be loaded or handed over
constexpr int exit_sandbox_exec = 10;        ///< executable memfds are not refused (vm.memfd_noexec)

/// The layer behind one of the exit codes above, or nullptr.
const char* sandbox_exit_layer(int exit_code) noexcept;

/// A failed step: the exit code to end with and what went wrong.
struct sandbox_failure {
  int exit_code = 0;
  failure why;
};

/// PID 1's half, done; the child's half is `apply_in_child`.
class sandbox_setup {
public:
  /// PID 1: read() then build(). Closes `spec_fd`.
  static std::optional<sandbox_setup> enter(int spec_fd, sandbox_failure& failed);

  /// PID 1, first half: read_sandbox_spec. Closes `spec_fd`.
  static std::optional<sandbox_setup> read(int spec_fd, sandbox_failure& failed);
  /// PID 1, second half: reads vm.memfd_noexec back (while the host's
  /// /proc is still there) → build_root → set_loopback_up → the egress relay's
  /// listener (when the spec has one) → drop its own capabilities →
  /// PR_SET_DUMPABLE 0.
  bool build(sandbox_failure& failed);

  /// What build_root reported.
  const platform::root_report& root() const noexcept { return root_; }

  /// The interpreter child, after fork and before exec (it inherits PID 1's
  /// dropped capabilities): apply_landlock → apply_seccomp → the notify filter, whose listener is
  /// sent over `control_fd` and closed here (the supervisor must be serving
  /// it before the exec, which may itself be a decided call); then
  /// CASTELLAN_ENFORCEMENT is set to the report. Returns 0, or an exit code
  /// after printing why to stderr.
  int apply_in_child(int control_fd) noexcept;

  /// An interpreter child forked between read() and build() (a launched
  /// worker's: it prepared its interpreter while PID 1 built the root), once
  /// PID 1 has built it: drops its own capabilities (it was forked before
  /// PID 1 dropped them), enters the root's working directory, takes PID 1's
  /// `root` report, then as apply_in_child.
  int apply_in_early_child(int control_fd, platform::root_report root) noexcept;

  /// The egress relay PID 1 serves, or null when the sandbox has no network.
  egress_relay* relay() noexcept { return relay_ ? &*relay_ : nullptr; }

private:
  platform::sandbox_spec spec_;
  std::optional<egress_relay> relay_;
  platform::root_report root_;
  platform::capabilities_report capabilities_; ///< PID 1's, verified after its drop
};

} // namespace castellan::worker
