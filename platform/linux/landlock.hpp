#pragma once

/// @file landlock.hpp
/// Landlock: unprivileged access control on file system paths, TCP ports and
/// IPC scopes, applied by a process to itself (and inherited by everything it
/// starts). ABI-adaptive: rights the running kernel lacks are dropped, or
/// refused when `best_effort` is false.
///
/// ABI history: 1 file system; 2 REFER; 3 TRUNCATE; 4 TCP bind/connect;
/// 5 IOCTL_DEV; 6 scoping of abstract unix sockets and signals; 7 audit
/// logging flags.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::platform {

/// File system rights (the kernel's LANDLOCK_ACCESS_FS_* bits).
namespace landlock_fs {
constexpr uint64_t execute = 1ull << 0;
constexpr uint64_t write_file = 1ull << 1;
constexpr uint64_t read_file = 1ull << 2;
constexpr uint64_t read_dir = 1ull << 3;
constexpr uint64_t remove_dir = 1ull << 4;
constexpr uint64_t remove_file = 1ull << 5;
constexpr uint64_t make_char = 1ull << 6;
constexpr uint64_t make_dir = 1ull << 7;
constexpr uint64_t make_reg = 1ull << 8;
constexpr uint64_t make_sock = 1ull << 9;
constexpr uint64_t make_fifo = 1ull << 10;
constexpr uint64_t make_block = 1ull << 11;
constexpr uint64_t make_sym = 1ull << 12;
constexpr uint64_t refer = 1ull << 13;     ///< ABI 2
constexpr uint64_t truncate = 1ull << 14;  ///< ABI 3
constexpr uint64_t ioctl_dev = 1ull << 15; ///< ABI 5
/// Every right of every ABI this build knows.
constexpr uint64_t all = (1ull << 16) - 1;
/// The rights that apply to a file (not a directory).
constexpr uint64_t file_rights = execute | write_file | read_file | truncate | ioctl_dev;
/// Read and run: what a read-only system directory gets.
constexpr uint64_t read_execute = execute | read_file | read_dir;
/// Everything: what a writable scratch directory gets.
constexpr uint64_t read_write = all;
} // namespace landlock_fs

/// TCP rights (LANDLOCK_ACCESS_NET_*, ABI 4).
namespace landlock_net {
constexpr uint64_t bind_tcp = 1ull << 0;
constexpr uint64_t connect_tcp = 1ull << 1;
constexpr uint64_t all = bind_tcp | connect_tcp;
} // namespace landlock_net

/// IPC scopes (LANDLOCK_SCOPE_*, ABI 6).
namespace landlock_scope {
constexpr uint64_t abstract_unix_socket = 1ull << 0;
constexpr uint64_t signal = 1ull << 1;
constexpr uint64_t all = abstract_unix_socket | signal;
} // namespace landlock_scope

struct landlock_path_rule {
  std::string path;   ///< opened O_PATH; the rule covers everything beneath
  uint64_t access = 0; ///< landlock_fs bits (file rights only when `path` is a file)
  bool optional = false; ///< a missing path is skipped (and reported)
};

struct landlock_port_rule {
  uint16_t port = 0;
  uint64_t access = 0; ///< landlock_net bits
};

struct landlock_spec {
  bool enabled = true;
  /// true: rights the kernel's ABI lacks are dropped (and reported); false:
  /// they are an error, and so is a kernel without Landlock.
  bool best_effort = true;
  uint64_t handled_fs = landlock_fs::all;   ///< what is denied unless a rule allows it
  std::vector<landlock_path_rule> paths;
  uint64_t handled_net = landlock_net::all; ///< 0 = TCP unrestricted
  std::vector<landlock_port_rule> ports;
  uint64_t scoped = landlock_scope::all;    ///< IPC that may not leave the sandbox
};

/// What is in force after apply_landlock.
struct landlock_report {
  int abi = 0;            ///< 0: the kernel has no Landlock (or it is disabled)
  bool enforced = false;
  uint64_t handled_fs = 0;
  uint64_t handled_net = 0;
  uint64_t scoped = 0;
  uint64_t dropped_fs = 0;     ///< requested but unknown to this ABI
  uint64_t dropped_net = 0;
  uint64_t dropped_scoped = 0;
  std::size_t path_rules = 0;
  std::size_t port_rules = 0;
  std::vector<std::string> skipped_paths; ///< optional rules whose path is missing
};

/// The running kernel's Landlock ABI version, or 0 without Landlock.
int landlock_abi() noexcept;

/// The rights an ABI version knows.
uint64_t landlock_fs_rights_of_abi(int abi) noexcept;
uint64_t landlock_net_rights_of_abi(int abi) noexcept;
uint64_t landlock_scopes_of_abi(int abi) noexcept;

/// Sets no_new_privs and restricts this process (and its future children).
/// Irreversible.
outcome<landlock_report> apply_landlock(const landlock_spec& spec);

/// "read_file,read_dir" for fs bits; the inverse parses one name.
std::vector<std::string> landlock_fs_names(uint64_t mask);
std::optional<uint64_t> landlock_fs_right(const std::string& name) noexcept;
std::vector<std::string> landlock_net_names(uint64_t mask);
std::optional<uint64_t> landlock_net_right(const std::string& name) noexcept;
std::vector<std::string> landlock_scope_names(uint64_t mask);
std::optional<uint64_t> landlock_scope_bit(const std::string& name) noexcept;

} // namespace castellan::platform
