#pragma once

/// @file thread_capabilities.hpp
/// The calling thread's own capability sets, read and changed for that
/// thread only. Credentials are per thread in Linux and the raw capget and
/// capset system calls act on the calling thread (glibc has no wrapper that
/// broadcasts them), so a thread that acts for someone with fewer
/// privileges can keep its permitted set, hold no effective capability
/// while it acts, and raise one only around a step of its own.

#include <cstdint>

namespace castellan::platform {

/// One thread's capability sets (bit n is capability n).
struct thread_capability_sets {
  uint64_t effective = 0;
  uint64_t permitted = 0;
  uint64_t inheritable = 0;
};

/// The calling thread's sets; 0 or an errno.
int get_thread_capabilities(thread_capability_sets& out) noexcept;

/// Sets the calling thread's sets to `sets` (the effective set must be
/// within the permitted one, which can only shrink); 0 or an errno.
int set_thread_capabilities(const thread_capability_sets& sets) noexcept;

/// The bit of capability `cap` (CAP_SYS_PTRACE...).
constexpr uint64_t capability_bit(int cap) noexcept { return uint64_t{1} << cap; }

} // namespace castellan::platform
