#pragma once

/// @file sandbox_spec.hpp
/// The worker-side half of a sandbox: what castellan-worker applies to itself
/// (its root, Landlock, seccomp). The supervisor serialises it to JSON in a
/// sealed memfd and passes that as an inherited fd; the worker reads it back
/// with full validation before it touches anything.

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/landlock.hpp"
#include "platform/linux/root_builder.hpp"
#include "platform/linux/seccomp_filter.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan::platform {

struct sandbox_spec {
  static constexpr int current_version = 1;

  root_spec root;           ///< includes the hostname
  landlock_spec landlock;
  seccomp_spec seccomp;
  /// System calls the supervisor decides (empty: no notify filter). The
  /// interpreter child loads it last and sends the listener over the
  /// control socket (castellan-worker --control-fd).
  notify_spec notify;
  /// vm.memfd_noexec = 2 in the sandbox's pid namespace (its first process
  /// writes it: worker_spec::memfd_noexec). PID 1 reads it back before it
  /// mounts the sandbox's /proc; when `required` and it is not 2, the worker
  /// ends (layer "exec") unless `best_effort`.
  struct memfd_noexec_spec {
    bool required = false;
    bool best_effort = false;
  } memfd_noexec;
  bool loopback_up = true;  ///< PID 1 brings lo up in its network namespace
  bool drop_capabilities = true;
  /// The egress relay (actors/proxy): when `egress_port` is not 0, PID 1
  /// listens on 127.0.0.1:`egress_port` inside the network namespace and
  /// passes every accepted connection over the AF_UNIX socket it inherited
  /// as fd `egress_fd` to the egress proxy. 0 / -1: no network at all.
  uint16_t egress_port = 0;
  int egress_fd = -1;
};

/// The spec as a JSON document (version 1, every field written).
std::string to_json(const sandbox_spec& spec);

/// Parses and validates a JSON document; an error names the JSON pointer of
/// the offending value ("/root/binds/2/target: …"). Unknown keys are errors.
outcome<sandbox_spec> parse_sandbox_spec(std::string_view json);

/// Writes the JSON into a memfd and seals it (no write, grow, shrink, or
/// further seals); the fd is close-on-exec: map it into the worker with
/// worker_spec::fds.
outcome<unique_fd> seal_sandbox_spec(const sandbox_spec& spec);

/// Reads a sealed memfd written by seal_sandbox_spec (refuses an unsealed or
/// oversized one) and parses it.
outcome<sandbox_spec> read_sandbox_spec(int fd);

/// A Landlock spec matching a root: read+execute on read-only binds,
/// everything on writable binds and tmpfs mounts, read on /etc and /proc,
/// read/write on the device nodes; TCP and IPC scoped.
landlock_spec default_landlock_spec(const root_spec& root);

/// default_root_spec(options) + default_landlock_spec + the anti-escape
/// seccomp filter.
sandbox_spec default_sandbox_spec(const default_root_options& options = {});

} // namespace castellan::platform
