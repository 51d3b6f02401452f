#include "platform/linux/root_builder.hpp"

#include <fcntl.h>
#include <glob.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <set>

#include "ipc/unique_fd.hpp"
#include "platform/linux/capabilities.hpp"
#include "platform/linux/mount_table.hpp"
#include "platform/linux/mounts.hpp"
#include "platform/linux/package_etc.hpp"

namespace castellan::platform {

namespace {

const char* const dev_nodes[] = {"null", "zero", "full", "random", "urandom"};
/// Where build_root keeps the overlays' upper layers on the root while it
/// builds it (detached before the sandbox runs).
constexpr const char* overlay_layers_dir = "/.castellan-upper";

bool normalised_absolute(const std::string& p) {
  if (p.size() < 2 || p.front() != '/' || p.back() == '/')
    return false;
  std::size_t pos = 1;
  while (pos <= p.size()) {
    std::size_t end = p.find('/', pos);
    if (end == std::string::npos)
      end = p.size();
    const std::string part = p.substr(pos, end - pos);
    if (part.empty() || part == "." || part == "..")
      return false;
    pos = end + 1;
  }
  return true;
}

std::string parent_of(const std::string& p) {
  const auto slash = p.rfind('/');
  return slash == 0 ? std::string() : p.substr(1, slash - 1); // relative to the root
}

std::string mib(uint64_t bytes) {
  return bytes % (1 << 20) == 0 ? std::to_string(bytes >> 20) + " MiB"
                                : std::to_string(bytes) + " bytes";
}

/// One step of the pipeline: "build root: <step>: <detail>".
failure at(const char* step, const failure& f) {
  return f.wrap(std::string("build root: ") + step);
}

/// Creates the mount point for a tree: a directory, or an empty file.
outcome<void> make_mount_point(const std::string& root, const std::string& target, bool dir) {
  if (auto r = make_directories(root, parent_of(target)); !r)
    return r;
  const std::string full = root + target;
  if (dir) {
    if (::mkdir(full.c_str(), 0755) != 0 && errno != EEXIST)
      return errno_failure("mkdir " + full);
    return {};
  }
  unique_fd fd(::open(full.c_str(), O_CREAT | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0444));
  if (!fd)
    return errno_failure("create mount point " + full);
  return {};
}

outcome<void> write_generated(const std::string& root, const generated_file& f) {
  if (auto r = make_directories(root, parent_of(f.path)); !r)
    return r;
  const std::string full = root + f.path;
  unique_fd fd(::open(full.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600));
  if (!fd)
    return errno_failure("create " + full);
  std::size_t done = 0;
  while (done < f.content.size()) {
    const ssize_t n = ::write(fd.get(), f.content.data() + done, f.content.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return errno_failure("write " + full);
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(fd.get(), f.mode) != 0)
    return errno_failure("chmod " + full);
  return {};
}

outcome<void> make_symlink(const std::string& root, const symlink_entry& s) {
  if (auto r = make_directories(root, parent_of(s.path)); !r)
    return r;
  const std::string full = root + s.path;
  if (::symlink(s.points_to.c_str(), full.c_str()) != 0)
    return errno_failure("symlink " + full + " -> " + s.points_to);
  return {};
}

struct captured {
  const bind_mount* spec;
  bind_mount own; ///< for binds build_root adds itself (/dev nodes)
  detached_tree tree;
};

} // namespace

bool path_covers(std::string_view ancestor, std::string_view path) noexcept {
  if (ancestor == "/")
    return !path.empty() && path.front() == '/';
  return path == ancestor ||
         (path.size() > ancestor.size() && path.compare(0, ancestor.size(), ancestor) == 0 &&
          path[ancestor.size()] == '/');
}

outcome<void> validate(const root_spec& spec) {
  std::set<std::string> targets;
  auto check = [&](const std::string& path, const char* what, bool unique) -> outcome<void> {
    if (!normalised_absolute(path))
      return logic_failure(std::string("root spec: ") + what + " '" + path +
                           "' is not a normalised absolute path (no '.', '..', '//', "
                           "trailing '/', and not '/')");
    if (unique && !targets.insert(path).second)
      return logic_failure(std::string("root spec: ") + what + " '" + path +
                           "' appears twice");
    return {};
  };
  if (spec.staging_dir.empty() || spec.staging_dir.front() != '/')
    return logic_failure("root spec: staging_dir must be absolute");
  if (spec.proc)
    targets.insert("/proc");
  if (spec.minimal_dev) {
    for (const char* n : dev_nodes)
      targets.insert(std::string("/dev/") + n);
    if (spec.dev_shm_size_bytes != 0)
      targets.insert("/dev/shm");
  }
  for (const auto& b : spec.binds) {
    if (b.source.empty() || b.source.front() != '/')
      return logic_failure("root spec: bind source '" + b.source + "' is not absolute");
    if (auto r = check(b.target, "bind target", true); !r)
      return r;
    if (b.overlay && (!b.writable || b.device))
      return logic_failure("root spec: bind '" + b.target +
                           "' has an overlay but is not a writable directory bind");
    if (b.overlay && (b.target.find_first_of(",:\\") != std::string::npos ||
                      spec.staging_dir.find_first_of(",:\\") != std::string::npos))
      return logic_failure("root spec: bind '" + b.target +
                           "' cannot have an overlay: its path has a ',', ':' or '\\', which "
                           "overlay options cannot carry");
  }
  // Where build_root keeps the overlays' upper layers while it builds.
  for (const auto& b : spec.binds)
    if (path_covers(overlay_layers_dir, b.target))
      return logic_failure(std::string("root spec: bind target '") + b.target + "' is " +
                           overlay_layers_dir + " or below it, which castellan keeps for itself");
  if (spec.overlay_size_bytes == 0 &&
      std::any_of(spec.binds.begin(), spec.binds.end(), [](const bind_mount& b) { return b.overlay; }))
    return logic_failure("root spec: overlay binds need an overlay_size_bytes above 0");
  for (const auto& t : spec.tmpfs)
    if (auto r = check(t.target, "tmpfs target", true); !r)
      return r;
  for (const auto& f : spec.files)
    if (auto r = check(f.path, "file", true); !r)
      return r;
  for (const auto& s : spec.symlinks) {
    if (auto r = check(s.path, "symlink", true); !r)
      return r;
    if (s.points_to.empty())
      return logic_failure("root spec: symlink '" + s.path + "' points nowhere");
  }
  for (const auto& m : spec.masked)
    if (!normalised_absolute(m))
      return logic_failure("root spec: masked path '" + m +
                           "' is not a normalised absolute path (and not '/')");
  if (!spec.workdir.empty() && spec.workdir.front() != '/')
    return logic_failure("root spec: workdir '" + spec.workdir + "' is not absolute");
  return {};
}

outcome<std::vector<detached_tree>> capture_bind_sources(root_spec& spec, int first_child_fd) {
  std::vector<detached_tree> trees;
  for (auto& b : spec.binds) {
    b.source_fd = -1;
    if (!b.captured_by_spawner)
      continue;
    if (b.spawner_fd >= 0) {
      // No path is resolved: the directory the spawner checked is what is
      // bound, whatever its path names by now. A failure refuses the worker
      // (there is no path the worker could fall back to).
      auto held = clone_tree_of(b.spawner_fd, b.source);
      if (!held)
        return held.error().wrap("capture bind source for " + b.target);
      if (auto ok = set_tree_attributes(held->fd.get(), 0, MOUNT_ATTR_NOSYMFOLLOW, true, b.source);
          !ok)
        return ok.error().wrap("capture bind source for " + b.target);
      b.source_fd = first_child_fd + static_cast<int>(trees.size());
      trees.push_back(std::move(*held));
      continue;
    }
    auto tree = clone_tree_no_symlinks(b.source);
    if (!tree) {
      // An unprivileged supervisor may not clone mounts (EPERM): its
      // worker captures the path itself (without following symlinks too)
      // and reaches what the supervisor's own user can. A missing source is
      // the worker's to report (skipped, or the root failing). Anything
      // else (a symlink planted on the way, above all) refuses the worker.
      if (tree.error().code == EPERM || tree.error().code == ENOENT)
        continue;
      return tree.error().wrap("capture bind source for " + b.target);
    }
    b.source_fd = first_child_fd + static_cast<int>(trees.size());
    trees.push_back(std::move(*tree));
  }
  return trees;
}

outcome<root_report> build_root(const root_spec& spec) {
  if (auto r = validate(spec); !r)
    return r.error();
  root_report report;
  const std::string& root = spec.staging_dir;

  // 1. Nothing we do may propagate to the host's mounts.
  if (auto r = make_mounts_private(); !r)
    return at("make / private", r.error());

  // 2. Capture every bind source as a detached tree *before* covering
  //    anything (the staging tmpfs may cover a source).
  std::vector<captured> trees;
  auto capture = [&](const bind_mount* b, bind_mount own) -> outcome<void> {
    const bind_mount& m = b ? *b : own;
    auto tree = m.source_fd >= 0         ? adopt_tree(m.source_fd, m.source)
                : m.captured_by_spawner ? clone_tree_no_symlinks(m.source)
                                        : clone_tree(m.source);
    if (!tree) {
      if (m.optional && tree.error().code == ENOENT) {
        report.skipped.push_back(m.target + " (" + m.source + " missing)");
        return {};
      }
      return at("capture bind source", tree.error());
    }
    uint64_t set = MOUNT_ATTR_NOSUID;
    // An overlay's lower layer is never written: the host's tree stays
    // read-only even under the overlay (which only ever writes its upper).
    if (!m.writable || m.overlay)
      set |= MOUNT_ATTR_RDONLY;
    if (!m.device)
      set |= MOUNT_ATTR_NODEV;
    if (m.device || !m.exec)
      set |= MOUNT_ATTR_NOEXEC;
    if (auto r = set_tree_attributes(tree->fd.get(), set, 0, true, m.source); !r)
      return at("restrict bind", r.error());
    trees.push_back(captured{b, std::move(own), std::move(*tree)});
    return {};
  };
  for (const auto& b : spec.binds)
    if (auto r = capture(&b, {}); !r)
      return r.error();
  if (spec.minimal_dev) {
    for (const char* n : dev_nodes) {
      bind_mount dev;
      dev.source = dev.target = std::string("/dev/") + n;
      // Read-only: writing the device still works (a node ignores its
      // mount's flag), but its inode, which is the host's and every
      // worker's, keeps its times, mode and owner (utime, chmod).
      dev.writable = false;
      dev.device = true;
      if (auto r = capture(nullptr, dev); !r)
        return r.error();
    }
  }

  // 3. The new root: a small tmpfs.
  if (auto r = mount_tmpfs(root, spec.root_size_bytes, 0755, false, "castellan-root"); !r)
    return at("root tmpfs", r.error());
  report.mounted.push_back("/ (tmpfs " + mib(spec.root_size_bytes) + ")");

  // 3b. The upper layers of the overlay binds: one tmpfs for them all, on
  //     the root while the root is built, detached from it once the
  //     overlays hold it (an overlay keeps a private clone of its upper's
  //     mount), so nothing inside the sandbox reaches a layer underneath
  //     the overlay that uses it.
  const bool overlays =
    std::any_of(spec.binds.begin(), spec.binds.end(), [](const bind_mount& b) { return b.overlay; });
  const std::string uppers = root + overlay_layers_dir;
  if (overlays) {
    if (::mkdir(uppers.c_str(), 0700) != 0)
      return at("overlay layers", errno_failure("mkdir " + uppers));
    if (auto r = mount_tmpfs(uppers, spec.overlay_size_bytes, 0700, false, "castellan-upper"); !r)
      return at("overlay layers", r.error());
  }
  std::size_t overlay_count = 0;

  // 4. tmpfs mounts (/tmp, /dev/shm) and binds. A tmpfs goes before the
  //    binds unless it lies inside one of them: otherwise it would cover a
  //    bind below it (a policy's path under /tmp would vanish under the
  //    sandbox's own /tmp).
  std::vector<tmpfs_mount> tmpfs = spec.tmpfs;
  if (spec.minimal_dev && spec.dev_shm_size_bytes != 0)
    tmpfs.push_back(tmpfs_mount{"/dev/shm", spec.dev_shm_size_bytes, 01777, false});
  auto inside_a_bind = [&spec](const std::string& path) {
    return std::any_of(spec.binds.begin(), spec.binds.end(), [&path](const bind_mount& b) {
      return path == b.target || path.rfind(b.target + "/", 0) == 0;
    });
  };
  auto mount_tmpfs_entries = [&](bool after_binds) -> outcome<void> {
    for (const auto& t : tmpfs) {
      if (inside_a_bind(t.target) != after_binds)
        continue;
      if (auto r = make_directories(root, t.target.substr(1)); !r)
        return at("tmpfs mount point", r.error());
      if (auto r = mount_tmpfs(root + t.target, t.size_bytes, t.mode, t.exec); !r)
        return at("tmpfs", r.error());
      report.mounted.push_back(t.target + " (tmpfs " + mib(t.size_bytes) + ")");
    }
    return {};
  };
  if (auto r = mount_tmpfs_entries(false); !r)
    return r.error();
  std::size_t unlisted = 0;
  for (auto& c : trees) {
    const bind_mount& m = c.spec ? *c.spec : c.own;
    if (auto r = make_mount_point(root, m.target, c.tree.is_dir); !r)
      return at("mount point", r.error());
    if (auto r = attach_tree(c.tree, root + m.target); !r)
      return at("attach bind", r.error());
    // The overlay goes on right away, before the binds below this one
    // (parents come first): they then land on the overlay, not under it.
    // A file the policy makes writable is bound read-only instead (the
    // capture made it so): an overlay covers directories only.
    const bool overlaid = m.overlay && c.tree.is_dir;
    if (overlaid) {
      // An overlay's lower layer is one mount: it would show, under a
      // mount below the source, the files that mount covers on the host
      // (which the kernel hides from a user namespace by locking the
      // mounts it copies, and a tree captured by the spawner is not
      // locked). Refused, never shown.
      auto below = mounts_at_or_below(root + m.target);
      if (!below)
        return at("overlay", below.error());
      std::string covered;
      for (const auto& e : *below)
        if (e.mount_point != root + m.target)
          covered += (covered.empty() ? "" : ", ") + e.mount_point.substr(root.size());
      if (!covered.empty())
        return at("overlay", logic_failure(
                               "the host directory " + m.source + " (writable at " + m.target +
                               ") has mounts below it (" + covered +
                               "): it cannot be overlaid, which would show the files they "
                               "cover; grant write below them or on no mounted directory"));
      const std::string layer = uppers + "/" + std::to_string(overlay_count++);
      for (const std::string& d : {layer, layer + "/upper", layer + "/work"})
        if (::mkdir(d.c_str(), 0755) != 0)
          return at("overlay layers", errno_failure("mkdir " + d));
      // CAP_DAC_OVERRIDE for this mount alone (capabilities.hpp says why);
      // the overlay keeps the credentials of its mount for its own work.
      bool was_on = false;
      if (int err = set_effective_capabilities(overlay_capability_mask(), true, &was_on))
        return at("overlay", failure{err, "raise CAP_DAC_OVERRIDE for the overlay on " + m.target});
      auto mounted = mount_overlay(root + m.target, layer + "/upper", layer + "/work",
                                   root + m.target, m.exec);
      if (!was_on)
        if (int err = set_effective_capabilities(overlay_capability_mask(), false))
          return at("overlay", failure{err, "lower CAP_DAC_OVERRIDE"});
      if (!mounted)
        return at("overlay", mounted.error());
    }
    if (m.listed)
      report.mounted.push_back(
        m.target + (m.device    ? std::string(" (device bind, inode read-only)")
                    : overlaid  ? std::string(" (bind ro + overlay: writes kept in the sandbox)")
                    : m.overlay ? std::string(" (bind ro: a file, not overlaid)")
                                : std::string(" (bind ") + (m.writable ? "rw" : "ro") + ")"));
    else
      ++unlisted;
  }
  trees.clear();
  if (unlisted != 0)
    report.mounted.push_back("/etc (" + std::to_string(unlisted) +
                             " binds ro of installed packages' entries, see etc)");
  report.etc = spec.etc;

  if (overlays) {
    if (::umount2(uppers.c_str(), MNT_DETACH) != 0)
      return at("overlay layers", errno_failure("detach " + uppers));
    if (::rmdir(uppers.c_str()) != 0)
      return at("overlay layers", errno_failure("rmdir " + uppers));
  }

  if (auto r = mount_tmpfs_entries(true); !r)
    return r.error();

  // 5. Masks, over what the binds and tmpfs mounts brought in.
  if (!spec.masked.empty()) {
    const std::string empty_file = root + "/.castellan-masked";
    unique_fd f(::open(empty_file.c_str(), O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC,
                       0));
    if (!f)
      return at("mask", errno_failure("create " + empty_file));
    for (const auto& m : spec.masked) {
      auto done = mask_path(root, m, empty_file);
      if (!done)
        return at("mask", done.error());
      if (*done == mask_outcome::missing)
        report.skipped.push_back(m + " (masked path missing)");
      else
        report.mounted.push_back(m + " (masked)");
    }
  }

  // 6. Generated files.
  for (const auto& f : spec.files)
    if (auto r = write_generated(root, f); !r)
      return at("generated file", r.error());

  // 7. A fresh /proc for our pid namespace (while the host's /proc is still
  //    visible in this mount namespace: the kernel requires it).
  if (spec.proc) {
    if (auto r = make_directories(root, "proc"); !r)
      return at("proc mount point", r.error());
    auto options = mount_proc(root + "/proc", spec.proc_hide_pids, spec.proc_subset_pid);
    if (!options)
      return at("proc", options.error());
    report.proc_options = options->empty() ? "defaults" : *options;
    report.mounted.push_back("/proc (proc " + report.proc_options + ")");
  }

  // 8. Symlinks, last: no path above may resolve through one.
  std::vector<symlink_entry> links = spec.symlinks;
  if (spec.minimal_dev) {
    links.push_back({"/dev/fd", "/proc/self/fd"});
    links.push_back({"/dev/stdin", "/proc/self/fd/0"});
    links.push_back({"/dev/stdout", "/proc/self/fd/1"});
    links.push_back({"/dev/stderr", "/proc/self/fd/2"});
  }
  for (const auto& s : links)
    if (auto r = make_symlink(root, s); !r)
      return at("symlink", r.error());

  // 9. Read-only root (the mounts on it keep their own flags).
  if (spec.read_only) {
    if (auto r = remount_read_only(root); !r)
      return at("read-only root", r.error());
    report.read_only = true;
  }

  // 10. Switch roots and drop the host's mount tree.
  if (auto r = pivot_to(root); !r)
    return at("pivot_root", r.error());

  if (!spec.hostname.empty()) {
    if (::sethostname(spec.hostname.data(), spec.hostname.size()) != 0)
      return at("sethostname", errno_failure(spec.hostname));
    report.hostname = spec.hostname;
  }
  if (!spec.workdir.empty() && ::chdir(spec.workdir.c_str()) != 0)
    return at("workdir", errno_failure("chdir " + spec.workdir));
  return report;
}

outcome<void> add_mount_entries(root_spec& spec, const std::vector<mount_entry>& entries) {
  auto drop_target = [&](const std::string& target) {
    spec.binds.erase(std::remove_if(spec.binds.begin(), spec.binds.end(),
                                    [&](const bind_mount& b) { return b.target == target; }),
                     spec.binds.end());
    spec.tmpfs.erase(std::remove_if(spec.tmpfs.begin(), spec.tmpfs.end(),
                                    [&](const tmpfs_mount& t) { return t.target == target; }),
                     spec.tmpfs.end());
  };
  for (const auto& e : entries) {
    switch (e.what) {
      case mount_entry::kind::bind: {
        if (e.source.empty() || e.source.front() != '/' || !normalised_absolute(e.target))
          return logic_failure("mount entry: bind '" + e.source + "' -> '" + e.target +
                               "' needs an absolute source and a normalised absolute target");
        drop_target(e.target);
        bind_mount b;
        b.source = e.source;
        b.target = e.target;
        b.writable = !e.read_only;
        spec.binds.push_back(b);
        break;
      }
      case mount_entry::kind::tmpfs: {
        if (!normalised_absolute(e.target))
          return logic_failure("mount entry: tmpfs target '" + e.target +
                               "' is not a normalised absolute path");
        drop_target(e.target);
        spec.tmpfs.push_back(tmpfs_mount{e.target, e.size_bytes, 01777, false});
        break;
      }
      case mount_entry::kind::proc:
        spec.proc = true;
        break;
      case mount_entry::kind::dev_minimal:
        spec.minimal_dev = true;
        break;
    }
  }
  return validate(spec);
}

root_spec default_root_spec(const default_root_options& options) {
  root_spec spec;
  auto ro = [&](const std::string& path, bool optional) {
    bind_mount b;
    b.source = b.target = path;
    b.optional = optional;
    spec.binds.push_back(b);
  };
  ro("/usr", false);
  // Merged /usr: /bin → usr/bin and friends are symlinks on the host; keep
  // them symlinks. Otherwise bind the directories.
  for (const char* top : {"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"}) {
    struct stat st;
    if (::lstat(top, &st) != 0)
      continue;
    if (S_ISLNK(st.st_mode)) {
      char buf[4096];
      const ssize_t n = ::readlink(top, buf, sizeof buf - 1);
      if (n > 0)
        spec.symlinks.push_back({top, std::string(buf, static_cast<std::size_t>(n))});
    } else if (S_ISDIR(st.st_mode)) {
      ro(top, false);
    }
  }
  const etc_view& etc = package_etc_view();
  for (const auto& e : etc.entries) {
    const std::string target = "/etc/" + e.name;
    if (e.type == etc_entry::kind::symlink) {
      spec.symlinks.push_back({target, e.link_target});
      continue;
    }
    bind_mount b;
    b.source = etc.etc_dir + "/" + e.name;
    b.target = target;
    b.exec = false;    // configuration, not programs
    b.optional = true; // removed since the view was derived: skipped and reported
    b.listed = false;
    spec.binds.push_back(std::move(b));
  }
  for (const auto& m : etc.masked)
    spec.masked.push_back("/etc/" + m);
  spec.etc.source = etc.source;
  spec.etc.entries = etc.entries.size();
  spec.etc.withheld = etc.withheld;
  for (const auto& extra : options.extra_read_only)
    ro(extra, false);

  const std::string uid = std::to_string(options.uid);
  const std::string gid = std::to_string(options.gid);
  spec.files.push_back({"/etc/passwd",
                        "root:x:0:0:root:/root:/usr/sbin/nologin\n"
                        "sandbox:x:" + uid + ":" + gid + ":sandbox:/tmp:/usr/sbin/nologin\n"
                        "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n",
                        0444});
  spec.files.push_back({"/etc/group",
                        "root:x:0:\nsandbox:x:" + gid + ":\nnogroup:x:65534:\n", 0444});
  spec.files.push_back({"/etc/hosts",
                        "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n"
                        "127.0.1.1\t" + options.hostname + "\n",
                        0444});
  spec.files.push_back({"/etc/nsswitch.conf",
                        "passwd: files\ngroup: files\nshadow: files\nhosts: files\n"
                        "networks: files\nprotocols: files\nservices: files\n",
                        0444});
  spec.tmpfs.push_back(tmpfs_mount{"/tmp", options.tmp_size_bytes, 01777, false});
  if (!options.workspace_source.empty()) {
    bind_mount w;
    w.source = options.workspace_source;
    w.target = "/workspace";
    w.writable = true;
    spec.binds.push_back(w);
    spec.workdir = "/workspace";
  } else {
    spec.workdir = "/tmp";
  }
  spec.hostname = options.hostname;
  return spec;
}

} // namespace castellan::platform
