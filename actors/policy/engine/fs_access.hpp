#pragma once

/// @file fs_access.hpp
/// The filesystem permission vocabulary of fs rules. Each atomic permission is
/// one bit, and the bit values are those of Landlock's LANDLOCK_ACCESS_FS_*
/// rights (ABI 5), so that the Landlock layer maps a rule's mask unchanged.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace castellan::policy {

/// A set of filesystem permissions (bitwise OR of `fs_perm` values).
using fs_access = uint32_t;

/// One atomic filesystem permission. Values equal LANDLOCK_ACCESS_FS_*.
enum class fs_perm : fs_access {
  execute = 1u << 0,     ///< execute a file
  write_file = 1u << 1,  ///< open a file for writing
  read_file = 1u << 2,   ///< open a file for reading
  read_dir = 1u << 3,    ///< list a directory
  remove_dir = 1u << 4,  ///< remove an empty directory or rename one away
  remove_file = 1u << 5, ///< unlink or rename away a file
  make_char = 1u << 6,   ///< create a character device
  make_dir = 1u << 7,    ///< create a directory
  make_reg = 1u << 8,    ///< create a regular file
  make_sock = 1u << 9,   ///< create a UNIX domain socket
  make_fifo = 1u << 10,  ///< create a named pipe
  make_block = 1u << 11, ///< create a block device
  make_sym = 1u << 12,   ///< create a symbolic link
  refer = 1u << 13,      ///< link or rename a file into another directory
  truncate = 1u << 14,   ///< truncate a file (truncate(2), O_TRUNC)
  ioctl_dev = 1u << 15,  ///< ioctl(2) on a character or block device
};

/// Number of atomic permissions (bits 0 .. fs_perm_count-1).
inline constexpr unsigned fs_perm_count = 16;

/// Every atomic permission.
inline constexpr fs_access fs_access_all = (1u << fs_perm_count) - 1u;

/// `write_dir`: the composite of everything that changes a directory's
/// entries (remove_* and make_*). Kept for compatibility with the reference
/// policies, which grant it on writable directories.
inline constexpr fs_access fs_access_write_dir =
    static_cast<fs_access>(fs_perm::remove_dir) | static_cast<fs_access>(fs_perm::remove_file) |
    static_cast<fs_access>(fs_perm::make_char) | static_cast<fs_access>(fs_perm::make_dir) |
    static_cast<fs_access>(fs_perm::make_reg) | static_cast<fs_access>(fs_perm::make_sock) |
    static_cast<fs_access>(fs_perm::make_fifo) | static_cast<fs_access>(fs_perm::make_block) |
    static_cast<fs_access>(fs_perm::make_sym);

constexpr fs_access to_access(fs_perm p) noexcept {
  return static_cast<fs_access>(p);
}

/// The mask named `name` (an atomic permission or the composite `write_dir`);
/// nothing for an unknown name.
std::optional<fs_access> parse_fs_perm(std::string_view name) noexcept;

/// The name of the atomic permission at bit `bit` (0 .. fs_perm_count-1).
std::string_view fs_perm_name(unsigned bit) noexcept;

/// Names of every bit in `mask`, comma-separated ("read_file,read_dir").
std::string to_string_access(fs_access mask);

/// Every accepted permission name, comma-separated (for error messages).
std::string_view fs_perm_vocabulary() noexcept;

} // namespace castellan::policy
