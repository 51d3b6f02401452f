#pragma once

/// @file syscall_names.hpp
/// Syscall names as libseccomp knows them (antiEscape.denySyscalls, audit.events).

#include <string_view>

namespace castellan::policy {

/// True when libseccomp resolves `name` (a syscall of the native architecture,
/// or one libseccomp knows as a pseudo-syscall of it, such as "socketcall" on
/// x86_64, which a filter can name harmlessly).
bool is_known_syscall(std::string_view name) noexcept;

} // namespace castellan::policy
