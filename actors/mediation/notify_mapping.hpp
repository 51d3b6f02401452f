#pragma once

/// @file notify_mapping.hpp
/// Which system calls a policy makes the supervisor decide: the seccomp
/// user-notification filter a worker installs (platform::notify_spec), and
/// which of the policy's fs rules the mediator enforces itself. Whatever a
/// policy leaves to the static layers (mounts, Landlock, the anti-escape
/// filter, the network namespace) stays out of the filter and costs nothing
/// per call.

#include "actors/policy/engine/policy_document.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan {

/// The system call names the notify filter must list for `policy`, and
/// whether opens for reading can stay out of it. Empty when the policy has
/// nothing the static layers (mounts, Landlock, the anti-escape filter)
/// cannot decide themselves: such a policy costs nothing per call.
platform::notify_spec notify_spec_for(const policy::policy_document& doc);

/// Whether the mediator decides `rule` wherever it applies. A deny rule on
/// the whole tree is what the defaults and the static layers already do; a
/// deny inside it carves out of what is granted, and a warn must be
/// reported: only the supervisor can decide those.
bool decides_fs_rule(const policy::fs_rule& rule);

} // namespace castellan
