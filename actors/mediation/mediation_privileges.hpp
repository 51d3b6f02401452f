#pragma once

/// @file mediation_privileges.hpp
/// The capabilities of the thread that decides a worker's calls (private to
/// actors/mediation). While it acts for the worker — opens, creates, removes,
/// renames, binds, connects — it holds no effective capability at all: the
/// kernel then checks those operations as it checks the worker's own (DAC as
/// the worker's fsuid/fsgid, no CAP_SYS_PTRACE for another process's /proc
/// files, no CAP_NET_ADMIN for sysctls, no CAP_DAC_OVERRIDE...). A step of
/// the supervisor's own (reading the caller's memory or its /proc entry,
/// taking one of its fds, entering its network namespace) raises exactly
/// what it needs and drops it right after.
///
/// Capabilities are per thread: the raw capset system call changes this
/// thread only (platform/linux/thread_capabilities.hpp).

#include <cstdint>

namespace castellan::mediation {

/// While it lives, the calling thread's effective set is empty; what was
/// there before is restored when it ends. Inside another scope, or on a
/// thread that gave up its effective set for good
/// (drop_effective_for_good), it only checks that the set is empty.
class without_capabilities {
public:
  without_capabilities() noexcept;
  ~without_capabilities();
  without_capabilities(const without_capabilities&) = delete;
  without_capabilities& operator=(const without_capabilities&) = delete;

  /// False when the effective set could not be emptied: act for no one.
  explicit operator bool() const noexcept { return ok_; }

private:
  bool ok_ = false;
  bool owner_ = false;
};

/// Empties the calling thread's effective set for the rest of its life:
/// from then on it raises what a step of its own needs with
/// raised_capabilities (the event source thread, which decides calls for
/// workers, does this when it starts: two capset calls fewer per
/// notification). False if the set could not be emptied.
bool drop_effective_for_good() noexcept;

/// Raises `mask` (as far as the thread's permitted set has it) for one step
/// of the supervisor's own, inside a without_capabilities scope, and empties
/// the effective set again when it ends. Outside such a scope, or with an
/// empty mask, it does nothing.
class raised_capabilities {
public:
  explicit raised_capabilities(uint64_t mask) noexcept;
  ~raised_capabilities();
  raised_capabilities(const raised_capabilities&) = delete;
  raised_capabilities& operator=(const raised_capabilities&) = delete;

private:
  bool raised_ = false;
};

/// Empties the effective set again (inside a without_capabilities scope):
/// after a change of the thread's effective uid back to 0, which gives it
/// its whole permitted set again. True when it is empty.
bool drop_effective() noexcept;

/// The calling thread's effective set as the kernel has it (capget).
uint64_t effective_now() noexcept;

/// CAP_SYS_PTRACE: the caller's memory, its /proc/<tid> entries, its fds.
uint64_t ptrace_cap() noexcept;
/// CAP_SETUID | CAP_SETGID: switching this thread's ids to the worker's.
uint64_t setid_caps() noexcept;
/// CAP_SYS_ADMIN: setns into the worker's network namespace and back.
uint64_t setns_cap() noexcept;
/// CAP_DAC_READ_SEARCH: reading the caller's own /proc entry, which is
/// root's when the caller is not dumpable.
uint64_t read_search_cap() noexcept;
/// CAP_KILL: ending a worker whose call may not go on.
uint64_t kill_cap() noexcept;

} // namespace castellan::mediation
