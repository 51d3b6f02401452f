#pragma once

/// @file file_io.hpp
/// Small, exact file helpers for kernel interface files (/proc, cgroupfs):
/// one open, one write or a bounded read, errors that name the path.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// Reads the whole of `path` (at most `max_bytes`; more is an error).
outcome<std::string> read_text_file(const std::string& path, std::size_t max_bytes = 1 << 20);

/// Writes `content` to an existing file in one write(2) (kernel interface
/// files take a value per write). No O_CREAT, no O_TRUNC.
outcome<void> write_text_file(const std::string& path, std::string_view content);

/// Parses a decimal unsigned integer, allowing surrounding whitespace.
std::optional<uint64_t> parse_u64(std::string_view text) noexcept;

/// The value of `key` in a "key value\n" file (cpu.stat, memory.events…).
std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key) noexcept;

/// True if `path` exists (any type, symlinks not followed).
bool path_exists(const std::string& path) noexcept;

} // namespace castellan::platform
