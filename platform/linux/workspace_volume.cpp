#include "platform/linux/workspace_volume.hpp"

#include <fcntl.h>
#include <spawn.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <optional>
#include <vector>

#include "platform/linux/loop_device.hpp"

namespace castellan::platform {

namespace {

constexpr long ext4_magic = 0xEF53;
constexpr std::size_t mke2fs_output_limit = 4096;

/// Why a mount operation was refused with EPERM: what it needs.
failure explain(failure f) {
  if (f.code == EPERM)
    f.message += " (mounting a workspace needs CAP_SYS_ADMIN in the initial user namespace: "
                 "run as root)";
  return f;
}

outcome<unique_fd> open_dir(int parent_fd, const std::string& name) {
  unique_fd fd(::openat(parent_fd, name.c_str(), O_PATH | O_NOFOLLOW | O_DIRECTORY | O_CLOEXEC));
  if (!fd)
    return errno_failure("open " + name + " (no symlink followed)");
  return fd;
}

/// The root of a mount, and the device of its file system; nothing when
/// `fd` is not a mount's root.
outcome<std::optional<dev_t>> mount_root_device(int fd, const std::string& name) {
  struct statx sx{};
  if (::statx(fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS, &sx) != 0)
    return errno_failure("statx " + name);
  if ((sx.stx_attributes_mask & STATX_ATTR_MOUNT_ROOT) == 0)
    return logic_failure("statx " + name + ": the kernel does not say whether it is a mount "
                                           "root (STATX_ATTR_MOUNT_ROOT, Linux 5.8)");
  if ((sx.stx_attributes & STATX_ATTR_MOUNT_ROOT) == 0)
    return std::optional<dev_t>();
  return std::optional<dev_t>(makedev(sx.stx_dev_major, sx.stx_dev_minor));
}

/// The text the file system context logged (fsconfig's reasons), one line.
std::string context_log(int fs_fd) {
  std::string out;
  char buf[512];
  for (int i = 0; i < 8; ++i) {
    const ssize_t n = ::read(fs_fd, buf, sizeof buf);
    if (n <= 0)
      break;
    out += (out.empty() ? "" : "; ") + std::string(buf, static_cast<std::size_t>(n));
  }
  return out;
}

} // namespace

outcome<std::string> find_mke2fs() {
  for (const char* p : {"/usr/sbin/mke2fs", "/sbin/mke2fs"})
    if (::access(p, X_OK) == 0)
      return std::string(p);
  return logic_failure("mke2fs not found in /usr/sbin or /sbin (Debian package e2fsprogs)");
}

outcome<void> format_volume(int image_fd, const volume_owner& owner, const std::string& what) {
  auto mke2fs = find_mke2fs();
  if (!mke2fs)
    return mke2fs.error();
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0)
    return errno_failure("format " + what + ": pipe");
  unique_fd read_end(out[0]);
  unique_fd write_end(out[1]);
  posix_spawn_file_actions_t actions;
  ::posix_spawn_file_actions_init(&actions);
  ::posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  ::posix_spawn_file_actions_adddup2(&actions, write_end.get(), 1);
  ::posix_spawn_file_actions_adddup2(&actions, write_end.get(), 2);
  ::posix_spawn_file_actions_adddup2(&actions, image_fd, 3);
  ::posix_spawn_file_actions_addclosefrom_np(&actions, 4);
  const std::string extended =
    "root_owner=" + std::to_string(owner.uid) + ":" + std::to_string(owner.gid) + ",nodiscard";
  std::vector<std::string> args = {*mke2fs, "-q",         "-F", "-t", "ext4", "-m", "0",
                                   "-e",    "remount-ro", "-E", extended, "/proc/self/fd/3"};
  std::vector<char*> argv;
  for (auto& a : args)
    argv.push_back(a.data());
  argv.push_back(nullptr);
  char env_path[] = "PATH=/usr/sbin:/usr/bin:/sbin:/bin";
  char env_lang[] = "LC_ALL=C";
  char* envp[] = {env_path, env_lang, nullptr};
  pid_t pid = -1;
  const int rc = ::posix_spawn(&pid, mke2fs->c_str(), &actions, nullptr, argv.data(), envp);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0)
    return errno_failure("format " + what + ": spawn " + *mke2fs, rc);
  write_end.reset();
  std::string output;
  char buf[1024];
  for (;;) {
    const ssize_t n = ::read(read_end.get(), buf, sizeof buf);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      break;
    if (output.size() < mke2fs_output_limit)
      output.append(buf, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return errno_failure("format " + what + ": waitpid mke2fs");
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    while (!output.empty() && (output.back() == '\n' || output.back() == ' '))
      output.pop_back();
    return logic_failure("format " + what + ": mke2fs " +
                         (WIFEXITED(status) ? "exited " + std::to_string(WEXITSTATUS(status))
                                            : std::string("was killed")) +
                         (output.empty() ? "" : ": " + output));
  }
  if (::fsync(image_fd) != 0)
    return errno_failure("format " + what + ": fsync");
  return {};
}

outcome<mount_point_state> probe_mount_point(int parent_fd, const std::string& name,
                                            int image_fd) {
  auto dir = open_dir(parent_fd, name);
  if (!dir)
    return dir.error();
  auto device = mount_root_device(dir->get(), name);
  if (!device)
    return device.error();
  if (!*device)
    return mount_point_state::empty;
  struct statfs fs;
  if (::fstatfs(dir->get(), &fs) != 0)
    return errno_failure("statfs " + name);
  if (fs.f_type != ext4_magic)
    return mount_point_state::other;
  auto loop = loop_device::open_if_backed_by(**device, image_fd);
  if (!loop)
    return loop.error();
  return *loop ? mount_point_state::this_image : mount_point_state::other;
}

outcome<unique_fd> open_volume_root(int parent_fd, const std::string& name, int image_fd) {
  auto dir = open_dir(parent_fd, name);
  if (!dir)
    return dir.error();
  auto device = mount_root_device(dir->get(), name);
  if (!device)
    return device.error();
  if (!*device)
    return logic_failure(name + " is not mounted");
  struct statfs fs;
  if (::fstatfs(dir->get(), &fs) != 0)
    return errno_failure("statfs " + name);
  if (fs.f_type != ext4_magic)
    return logic_failure(name + ": another file system is mounted there");
  auto loop = loop_device::open_if_backed_by(**device, image_fd);
  if (!loop)
    return loop.error();
  if (!*loop)
    return logic_failure(name + ": the file system mounted there is not this workspace's image");
  return std::move(*dir);
}

outcome<void> mount_volume(int image_fd, int parent_fd, const std::string& name,
                           const std::string& what) {
  auto target = open_dir(parent_fd, name);
  if (!target)
    return target.error().wrap("mount " + what);
  auto existing = loop_device::find_backed_by(image_fd);
  if (!existing)
    return existing.error().wrap("mount " + what);
  std::optional<loop_device> loop = std::move(*existing);
  if (!loop) {
    auto attached = loop_device::attach(image_fd, what);
    if (!attached)
      return attached.error().wrap("mount " + what);
    loop.emplace(std::move(*attached));
  }
  unique_fd fs(::fsopen("ext4", FSOPEN_CLOEXEC));
  if (!fs)
    return explain(errno_failure("mount " + what + ": fsopen ext4"));
  const std::string source = loop->fd_path();
  if (::fsconfig(fs.get(), FSCONFIG_SET_STRING, "source", source.c_str(), 0) != 0 ||
      ::fsconfig(fs.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
    const int err = errno;
    const std::string log = context_log(fs.get());
    return explain(errno_failure("mount " + what + " from " + loop->path() +
                                   (log.empty() ? "" : " (" + log + ")"),
                                 err));
  }
  unique_fd mnt(::fsmount(fs.get(), FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV |
                                                     MOUNT_ATTR_NOEXEC | MOUNT_ATTR_NOSYMFOLLOW));
  if (!mnt)
    return explain(errno_failure("mount " + what + ": fsmount"));
  if (::move_mount(mnt.get(), "", target->get(), "",
                   MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0)
    return explain(errno_failure("mount " + what + ": move_mount onto " + name));
  // The mount holds the device now; closing our handle leaves it to the
  // mount (auto-clear detaches it when the file system goes away).
  return {};
}

outcome<void> unmount_volume(int parent_fd, const std::string& name) {
  for (int layer = 0; layer < 16; ++layer) {
    auto dir = open_dir(parent_fd, name);
    if (!dir)
      return dir.error().wrap("unmount");
    auto device = mount_root_device(dir->get(), name);
    if (!device)
      return device.error().wrap("unmount");
    if (!*device)
      return {};
    // Through the fd: the very mount that was looked at, whatever the path
    // names meanwhile. Our own fd keeps the mount busy, so the detach is
    // lazy; the file system goes when the last user (this fd, a sandbox's
    // bind of it) lets go, and its auto-clear loop device with it.
    const std::string self = "/proc/self/fd/" + std::to_string(dir->get());
    if (::umount2(self.c_str(), MNT_DETACH) != 0)
      return explain(errno_failure("unmount " + name));
  }
  return logic_failure("unmount " + name + ": still a mount point after 16 unmounts");
}

outcome<volume_usage> usage_of(int parent_fd, const std::string& name) {
  auto dir = open_dir(parent_fd, name);
  if (!dir)
    return dir.error();
  auto device = mount_root_device(dir->get(), name);
  if (!device)
    return device.error();
  if (!*device)
    return logic_failure("usage of " + name + ": not mounted");
  struct statfs fs;
  if (::fstatfs(dir->get(), &fs) != 0)
    return errno_failure("statfs " + name);
  const auto block = static_cast<uint64_t>(fs.f_bsize);
  volume_usage u;
  u.size_bytes = static_cast<uint64_t>(fs.f_blocks) * block;
  u.used_bytes = static_cast<uint64_t>(fs.f_blocks - fs.f_bfree) * block;
  u.free_bytes = static_cast<uint64_t>(fs.f_bavail) * block;
  u.files = static_cast<uint64_t>(fs.f_files - fs.f_ffree);
  return u;
}

} // namespace castellan::platform
