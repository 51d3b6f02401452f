#include "platform/linux/workspace_path.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

namespace castellan::platform {

namespace {

constexpr std::string_view prefix = "/workspace";

failure invalid(std::string_view text, const std::string& why) {
  return failure{EINVAL, "path '" + std::string(text.substr(0, 256)) + "': " + why};
}

/// Why the kernel refused to resolve a path, in words a client can act on.
std::string refusal_reason(int err) {
  switch (err) {
    case EXDEV:
      return "it leads out of the workspace (an absolute symlink, a symlink or '..' above "
             "/workspace, or another mount)";
    case ELOOP:
      return "a symlink loop, a magic link (/proc/<pid>/fd-like), or a symlink where none "
             "is followed";
    case ENOENT:
      return "no such file or directory";
    case ENOTDIR:
      return "a component of it is not a directory";
    default:
      return "cannot be opened";
  }
}

} // namespace

std::string workspace_path::relative() const {
  if (parts.empty())
    return ".";
  std::string out;
  for (const auto& p : parts) {
    if (!out.empty())
      out += '/';
    out += p;
  }
  return out;
}

std::string workspace_path::display() const {
  return parts.empty() ? std::string(prefix) : std::string(prefix) + "/" + relative();
}

outcome<workspace_path> parse_workspace_path(std::string_view text) {
  if (text.size() > 4096)
    return invalid(text, "longer than 4096 bytes");
  if (text.find('\0') != std::string_view::npos)
    return invalid(text, "contains a NUL byte");
  std::string_view rest = text;
  if (!rest.empty() && rest.front() == '/') {
    // The sandbox's own name for its workspace is the one absolute form:
    // "/workspace" itself or a path below it, nothing else of the sandbox's
    // tree (its /tmp, /etc) is reachable through the workspace.
    if (rest.substr(0, prefix.size()) != prefix ||
        (rest.size() > prefix.size() && rest[prefix.size()] != '/'))
      return invalid(text, "an absolute path must lie under /workspace");
    rest.remove_prefix(prefix.size());
  }
  workspace_path out;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const auto part = rest.substr(0, slash);
    rest = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    if (part.empty() || part == ".")
      continue;
    if (part == "..")
      return invalid(text, "'..' is not allowed (paths are resolved inside the workspace)");
    if (part.size() > NAME_MAX)
      return invalid(text, "a component is longer than 255 bytes");
    out.parts.emplace_back(part);
  }
  return out;
}

unsigned long long workspace_resolve_flags() noexcept {
  return RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV;
}

outcome<unique_fd> open_beneath(int root_fd, const workspace_path& path, int flags,
                                unsigned mode) {
  open_how how{};
  how.flags = static_cast<unsigned long long>(flags | O_CLOEXEC);
  how.mode = (flags & (O_CREAT | O_TMPFILE)) != 0 ? mode : 0;
  how.resolve = workspace_resolve_flags();
  const std::string rel = path.relative();
  long fd = -1;
  // RESOLVE_BENEATH answers EAGAIN when a rename elsewhere in the tree ran
  // during the lookup (the kernel cannot then prove ".." stayed beneath);
  // the sandbox can cause that at will, so a few tries, then the error.
  for (int attempt = 0; attempt < 8; ++attempt) {
    fd = ::syscall(SYS_openat2, root_fd, rel.c_str(), &how, sizeof how);
    if (fd >= 0 || errno != EAGAIN)
      break;
  }
  if (fd < 0) {
    const int err = errno;
    return failure{err, path.display() + ": " + refusal_reason(err)};
  }
  return unique_fd(static_cast<int>(fd));
}

outcome<workspace_parent> open_parent(int root_fd, const workspace_path& path) {
  if (path.is_root())
    return failure{EINVAL, "/workspace itself has no parent in the workspace"};
  workspace_path parent{std::vector<std::string>(path.parts.begin(), path.parts.end() - 1)};
  auto dir = open_beneath(root_fd, parent, O_PATH | O_DIRECTORY);
  if (!dir)
    return failure{dir.error().code, path.display() + ": its directory " +
                                       dir.error().message};
  return workspace_parent{std::move(*dir), path.parts.back()};
}

outcome<void> check_openat2() {
  open_how how{};
  how.flags = O_PATH | O_CLOEXEC;
  how.resolve = workspace_resolve_flags();
  const long fd = ::syscall(SYS_openat2, AT_FDCWD, ".", &how, sizeof how);
  if (fd < 0) {
    if (errno == ENOSYS || errno == E2BIG || errno == EINVAL)
      return errno_failure("openat2 with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS | "
                           "RESOLVE_NO_XDEV (Linux 5.6 or later) is needed for workspace files");
    return outcome<void>{};
  }
  ::close(static_cast<int>(fd));
  return outcome<void>{};
}

} // namespace castellan::platform
