#pragma once

/// @file policy_tightening.hpp
/// When a request's policy may run on a pool configured for another policy,
/// and what the exec's process then applies to itself. CAF-free.
///
/// Both policies are compared as what they make of a pool (`pool_config`,
/// from `apply_policy` on the same template): the mounts, the Landlock and
/// seccomp rules, the masks, the cgroup limits. A request policy runs on a
/// pool in one of two ways:
/// - *same enforcement*: both give the same sandbox, so the pool's workers
///   already enforce the request policy exactly (any mode);
/// - *narrowed*: in a fork-mode pool, when the request policy is a
///   tightening of the pool's (it grants nothing the pool does not, and
///   every difference is one the exec's own process can enforce with an
///   extra Landlock ruleset and seccomp filter); the child forked for the
///   exec applies them before the code runs (docs/wire.md, TIGHTEN).
/// Anything else needs a pool of its own.

#include <string>

#include "ipc/outcome.hpp"

namespace castellan {

struct pool_config;

/// The answer of a comparison: empty when it holds, else the first reason
/// it does not (for logs and tests).
struct policy_fit {
  std::string why_not;
  explicit operator bool() const noexcept { return why_not.empty(); }
};

/// True when `request` gives exactly the sandbox `pool` has: same mounts,
/// Landlock and seccomp rules, masks, limits, interpreter; neither decides
/// system calls through seccomp notify nor has network (a decided call or
/// an egress decision would use the pool's own policy).
policy_fit same_enforcement(const pool_config& pool, const pool_config& request);

/// True when `request` may run narrowed on `pool` (see the file comment):
/// - `pool` runs `fork` mode, both are sandboxed, and `pool` enforces every
///   layer `request` asks for;
/// - neither decides system calls through seccomp notify (the supervisor
///   performs a decided open itself: the child's Landlock would not apply);
/// - `request` has no network (the proxy would decide with the pool's
///   policy); when the pool has network, the kernel's Landlock restricts TCP;
/// - every host path `request` binds, `pool` binds with at least those
///   rights; its masked paths are the pool's (masks are mounts: the child
///   cannot add any, and a pool mask the request lacks would deny it what
///   its policy allows);
/// - when the pool restricts execution, `request` does too, to a subset;
/// - every system call the pool denies or kills, `request` does too;
/// - the cgroup limits, output limits and code limit are equal (they are
///   the worker's, not the exec's), so is the interpreter.
/// The request's timeout is the exec's own deadline and needs no check.
policy_fit narrows(const pool_config& pool, const pool_config& request);

/// The TIGHTEN payload for running `request` narrowed on `pool`: the
/// Landlock rules of `request`'s own sandbox and a seccomp program (built
/// with libseccomp, base64) for the calls `request` denies or kills beyond
/// the pool's filter, with `policy_name` for the report. Only meaningful
/// when `narrows(pool, request)`.
outcome<std::string> make_tightening(const pool_config& pool, const pool_config& request,
                                     const std::string& policy_name);

} // namespace castellan
