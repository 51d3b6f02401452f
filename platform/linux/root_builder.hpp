#pragma once

/// @file root_builder.hpp
/// The worker's root file system: a size-limited tmpfs holding read-only
/// binds of the system directories, generated /etc files, a fresh /proc, a
/// minimal /dev, a tmpfs /tmp and an optional writable /workspace; then
/// pivot_root into it. Run by castellan-worker as PID 1 of its pid namespace,
/// inside its own user and mount namespaces, before anything untrusted runs.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ipc/outcome.hpp"
#include "platform/linux/mounts.hpp"
#include "platform/worker_spec.hpp"

namespace castellan::platform {

/// A host path made visible inside the sandbox.
struct bind_mount {
  std::string source;    ///< host path (symlinks followed)
  std::string target;    ///< absolute path inside the sandbox
  bool writable = false; ///< false: MOUNT_ATTR_RDONLY on the whole tree
  bool exec = true;      ///< false: MOUNT_ATTR_NOEXEC
  bool optional = false; ///< a missing source is skipped (and reported), not an error
  bool device = false;   ///< device nodes stay usable (no NODEV); implies noexec
  /// false: no line of its own in root_report::mounted (the /etc entries
  /// of installed packages are summed up in one line and root_report::etc).
  bool listed = true;
  /// The spawning process captures the source (capture_bind_sources) instead
  /// of the worker: for a source below a directory the worker's user cannot
  /// enter (a build or install under a 0700 home directory). Whoever
  /// captures it follows no symlink on the way (a policy's path may be one
  /// an earlier worker could write).
  bool captured_by_spawner = false;
  /// With captured_by_spawner: an fd of the spawning process (O_PATH, a
  /// directory it opened and checked) captured instead of `source`, which
  /// then only names it; -1: `source` is resolved. The clone follows
  /// symlinks (MOUNT_ATTR_NOSYMFOLLOW cleared): a host mount may refuse them
  /// for the host's sake (a workspace's mount, workspace_volume.hpp), while
  /// in the sandbox they resolve inside its own root. Never serialised: it
  /// means nothing in the worker.
  int spawner_fd = -1;
  /// The worker's fd of the detached tree the spawner captured; -1: the
  /// worker captures `source` by path.
  int source_fd = -1;
  /// Writes land in an overlay upper layer on the sandbox's own tmpfs
  /// (root_spec::overlay_size_bytes), never in `source`, which the overlay
  /// sees read-only: they are gone when the sandbox is. Needs `writable`.
  /// The overlay shows the source's own file system only: mounts below the
  /// source on the host show the directory they cover.
  bool overlay = false;
};

/// Where the sandbox's /etc came from (package_etc.hpp), for the report.
struct etc_summary {
  std::string source;                ///< "dpkg: 1043 packages, …"; empty when not derived
  uint64_t entries = 0;              ///< /etc entries bound or linked
  std::vector<std::string> withheld; ///< candidates not shown: "shadow (deny list)"
};

/// A tmpfs inside the sandbox (always nosuid, nodev).
struct tmpfs_mount {
  std::string target;
  uint64_t size_bytes = 64ull << 20;
  unsigned mode = 01777;
  bool exec = false;
};

/// A file generated inside the sandbox (on the root tmpfs).
struct generated_file {
  std::string path;
  std::string content;
  unsigned mode = 0444;
};

/// A symlink inside the sandbox (created last, after every mount).
struct symlink_entry {
  std::string path;
  std::string points_to;
};

struct root_spec {
  /// Where the new root is assembled before pivot_root (covered only in the
  /// worker's mount namespace).
  std::string staging_dir = "/tmp";
  uint64_t root_size_bytes = 8ull << 20; ///< the root tmpfs: mount points and generated files
  bool read_only = true;                 ///< remount the root tmpfs read-only once populated
  /// The tmpfs that holds the upper layers of every bind_mount::overlay
  /// together (unused when no bind has one): what they may write in all.
  uint64_t overlay_size_bytes = 64ull << 20;
  std::vector<bind_mount> binds;         ///< attached in this order (parents first)
  std::vector<tmpfs_mount> tmpfs;
  std::vector<generated_file> files;
  std::vector<symlink_entry> symlinks;
  /// Paths inside the root hidden behind an inaccessible cover (mask_path in
  /// mounts.hpp) once the binds and tmpfs mounts are in place: what the
  /// policy denies to read below a directory it binds. Missing ones are skipped.
  std::vector<std::string> masked;
  etc_summary etc;         ///< carried into root_report::etc
  bool proc = true;        ///< a fresh /proc for the worker's pid namespace
  bool proc_hide_pids = true;
  bool proc_subset_pid = true;
  bool minimal_dev = true; ///< /dev/{null,zero,full,random,urandom} and fd symlinks, no tty
  uint64_t dev_shm_size_bytes = 16ull << 20; ///< /dev/shm tmpfs (POSIX shm, semaphores); 0 = none
  std::string hostname;    ///< sethostname when non-empty (needs a UTS namespace)
  std::string workdir = "/"; ///< chdir here at the end
};

/// What build_root did.
struct root_report {
  std::vector<std::string> mounted; ///< "/usr (bind ro)", "/tmp (tmpfs 64 MiB)", …
  std::vector<std::string> skipped; ///< optional binds whose source is missing, masks with no target
  std::string proc_options = "not mounted";
  bool read_only = false;
  std::string hostname;
  etc_summary etc; ///< root_spec::etc
  /// vm.memfd_noexec as PID 1 read it back in the sandbox's pid namespace
  /// (before /proc was replaced): 2 refuses executable memfds; -1: not read
  /// (a kernel without it, before 6.3).
  int memfd_noexec = -1;
};

/// Checks the paths (absolute, normalised, no "..", no duplicate targets).
outcome<void> validate(const root_spec& spec);

/// True when `ancestor` is `path` or a directory above it (both absolute and
/// normalised): whether a mount or rule at `ancestor` covers `path`.
bool path_covers(std::string_view ancestor, std::string_view path) noexcept;

/// Captures, in the calling process, the source of every bind marked
/// captured_by_spawner (clone_tree), and sets its source_fd to the fd the
/// worker will find it at: first_child_fd, first_child_fd + 1, … in the order
/// of the returned trees, which the caller maps there. No symlink is
/// followed on the way (clone_tree_no_symlinks): a source that is or passes
/// through one is an error. A source an unprivileged caller may not clone
/// (EPERM), or a missing one, is left to the worker, which captures it the
/// same way or reports why not.
outcome<std::vector<detached_tree>> capture_bind_sources(root_spec& spec, int first_child_fd);

/// Builds the root and pivots into it (see the file comment). Needs
/// CAP_SYS_ADMIN in the user namespace that owns the current mount and pid
/// namespaces. Each failure names its step, the path and the errno.
outcome<root_report> build_root(const root_spec& spec);

/// Inputs of `default_root_spec`.
struct default_root_options {
  std::string workspace_source; ///< host directory bound writable at /workspace; empty = none
  std::vector<std::string> extra_read_only; ///< more host paths, bound read-only at the same path
  uint64_t tmp_size_bytes = 64ull << 20;
  std::string hostname = "castellan";
  uint32_t uid = 1000;
  uint32_t gid = 1000;
};

/// What /usr/bin/python3 (and a POSIX shell) need, detected on this host:
/// /usr read-only; /bin, /sbin, /lib* as symlinks where the host has merged
/// /usr, else read-only binds; of /etc what the installed packages put there
/// minus secrets (package_etc_view(), read-only, noexec, masks inside) and
/// generated passwd, group, hosts and nsswitch.conf; tmpfs /tmp; /proc;
/// minimal /dev; the workspace.
root_spec default_root_spec(const default_root_options& options = {});

/// Adds the portable mount list of a worker_spec to `spec`: bind → a bind
/// (read-only unless `read_only` is false), tmpfs → a tmpfs (mode 1777),
/// proc → spec.proc, dev_minimal → spec.minimal_dev. A target that the spec
/// already has is replaced.
outcome<void> add_mount_entries(root_spec& spec, const std::vector<mount_entry>& entries);

} // namespace castellan::platform
