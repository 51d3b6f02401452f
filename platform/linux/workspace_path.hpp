#pragma once

/// @file workspace_path.hpp
/// Paths inside a workspace, as the host (the daemon, running as root)
/// reaches them on behalf of a client while hostile sandboxed code owns the
/// tree and may change it at any moment. A path is parsed once into
/// components, and then only ever used relative to a directory fd: the
/// kernel resolves it (openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS
/// | RESOLVE_NO_XDEV), and every later step works on the fd it returned,
/// never on the string again. An object the sandbox swaps after it was
/// resolved (a directory turned into a symlink) changes nothing for an fd
/// that is already open.
///
/// Errors carry the errno that says their kind (workspace_files.hpp maps
/// them to the API's error codes): EINVAL a malformed path, EXDEV a path
/// or symlink that leads out of the workspace (or onto another mount),
/// ELOOP a magic link or too many links, ENOENT, ENOTDIR.

#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::platform {

/// A path inside a workspace, split into components: no empty component,
/// no ".", no "..", none longer than NAME_MAX. Empty: the workspace's root.
struct workspace_path {
  std::vector<std::string> parts;

  bool is_root() const noexcept { return parts.empty(); }
  /// "a/b/c" ("." for the root): how errors name it.
  std::string relative() const;
  /// "/workspace/a/b/c": how the sandbox names it.
  std::string display() const;
};

/// Parses a client's path. Accepted forms: relative to the workspace
/// ("data/x.csv", "./data//x.csv"), or absolute under "/workspace"
/// ("/workspace/data/x.csv"); "", ".", "/workspace" name the root. Refused
/// (EINVAL, the message says why): any other absolute path, a ".."
/// component (the kernel would refuse one that leaves the root too, but a
/// client never needs one and the lexical refusal names the path), a NUL
/// byte, a component over 255 bytes, more than 4096 bytes in all.
outcome<workspace_path> parse_workspace_path(std::string_view text);

/// The resolve flags of every lookup below the workspace root:
/// RESOLVE_BENEATH (no absolute path or symlink, no ".." above the root:
/// EXDEV), RESOLVE_NO_MAGICLINKS (no /proc/<pid>/fd-style link: ELOOP),
/// RESOLVE_NO_XDEV (no crossing into another mount: EXDEV).
unsigned long long workspace_resolve_flags() noexcept;

/// openat2(root_fd, path, flags, mode, workspace_resolve_flags()), with
/// O_CLOEXEC added. Symlinks inside the workspace that stay inside it are
/// followed, unless `flags` has O_NOFOLLOW (the last component is then
/// opened itself, with O_PATH, or refused ELOOP). The message names the
/// path and why it was refused.
outcome<unique_fd> open_beneath(int root_fd, const workspace_path& path, int flags,
                                unsigned mode = 0);

/// The directory that holds `path`'s last component, opened O_PATH |
/// O_DIRECTORY beneath `root_fd`, and that component's name. EINVAL for the
/// root (it has no parent in the workspace).
struct workspace_parent {
  unique_fd dir;
  std::string name;
};
outcome<workspace_parent> open_parent(int root_fd, const workspace_path& path);

/// Whether the running kernel has openat2 with the flags above (5.6+);
/// a failure that says what is missing otherwise.
outcome<void> check_openat2();

} // namespace castellan::platform
