#pragma once

/// @file sandbox_fs_rights.hpp
/// The file-system rights a sandbox gives its code, derived from the policy
/// in one place, and the decision `castellan policy explain` reports from
/// the same data, so that explain and the kernel agree by construction.
///
/// The sandbox's root (binds, tmpfs mounts, generated files, /proc, /dev
/// nodes) is the ceiling: its Landlock rules grant what each tree of the
/// root can do (read-only binds: read and execute; tmpfs: read and write).
/// limit_landlock_to_policy cuts every rule down to what the policy allows
/// at the rule's path, so a right the policy denies on a whole tree (by a
/// rule, or by its default) is refused by the kernel there. What remains
/// finer than a tree (a deny rule beneath a granted tree, a warn) is the
/// supervisor's to decide (seccomp notify, syscall_mediator.hpp). Base
/// grants are what castellan itself needs in every sandbox (the harness,
/// /proc) or gave this one (its workspace): granted unless a rule of the policy denies them at the tree's own
/// path. A deny rule only beneath them is not enforced (the mediator leaves
/// the harness and /proc/self alone), though decide_in_sandbox reports it.

#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/compiled_policy.hpp"
#include "platform/linux/sandbox_spec.hpp"

namespace castellan {

/// A right castellan grants in every sandbox unless a policy rule denies it.
struct base_grant {
  std::string path;    ///< inside the sandbox; covers everything beneath
  uint64_t access = 0; ///< landlock_fs bits (the policy's fs permission bits)
  std::string why;
};

/// The base grants: the harness directory and /proc, read.
const std::vector<base_grant>& base_grants();

/// The base grants of a sandbox whose root is `root`: base_grants(), and
/// read and write (no execute, no device nodes) on /workspace when the root
/// binds a workspace there writable.
std::vector<base_grant> base_grants_for(const platform::root_spec& root);

/// Limits every path rule of `spec.landlock` to what `policy` allows (or
/// warns about) at the rule's own path, plus the base grants the policy
/// does not deny by a rule. Rules for paths the root generated
/// (platform::root_spec::files) are added per file first, so that each file
/// gets its own decision.
void limit_landlock_to_policy(platform::sandbox_spec& spec,
                              const policy::compiled_policy& policy);

/// What a sandbox built from `spec` (after limit_landlock_to_policy) and
/// `policy` does with `access` on `path`: the policy's decision where the
/// sandbox agrees with it, else the sandbox's own (a right its root does not
/// have there, a base grant, or the owner and mode of the host file behind a
/// bind refusing the sandbox's host uid: platform/linux/host_permissions.hpp).
struct sandbox_decision {
  policy::action verdict = policy::action::deny;
  std::string by; ///< "/fs/rules/3", "default", "sandbox: …", "castellan base: …"
};
sandbox_decision decide_in_sandbox(const platform::sandbox_spec& spec,
                                   const policy::compiled_policy& policy, std::string_view path,
                                   policy::fs_access access);

} // namespace castellan
