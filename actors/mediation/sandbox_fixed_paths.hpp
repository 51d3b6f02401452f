#pragma once

/// @file sandbox_fixed_paths.hpp
/// The paths every sandbox has whatever its policy says, which both the
/// sandbox's static layers (sandbox_profile.hpp) and the supervisor's
/// decisions (syscall_mediator.hpp) treat as castellan's own: one list, so
/// that what the sandbox grants and what the mediator lets through agree.

#include <string>
#include <vector>

namespace castellan {

/// Where the harness directory appears inside every sandbox (read-only).
inline constexpr const char* sandbox_harness_dir = "/opt/castellan/python";

/// Where a workspace appears inside a sandbox that has one (read-write).
inline constexpr const char* sandbox_workspace_dir = "/workspace";

/// The ELF interpreters (dynamic loaders) an allowed program may name: the
/// kernel opens them for execution as it opens a program, so they keep
/// Landlock EXECUTE under an exec deny (docs/security.md, "Exec rules").
const std::vector<std::string>& elf_loaders();

} // namespace castellan
