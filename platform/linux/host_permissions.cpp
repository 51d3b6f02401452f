#include "platform/linux/host_permissions.hpp"

#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>

#include "platform/linux/landlock.hpp"
#include "platform/linux/uid_map.hpp"

namespace castellan::platform {

namespace {

constexpr mode_t may_read = 4;
constexpr mode_t may_write = 2;
constexpr mode_t may_search = 1;

/// The bind whose tree holds `path`, or null when a tmpfs mount (or nothing
/// the root mounts) is nearer.
const bind_mount* bind_holding(const root_spec& root, std::string_view path) {
  const bind_mount* best = nullptr;
  std::size_t best_len = 0;
  for (const auto& b : root.binds)
    if (path_covers(b.target, path) && (best == nullptr || b.target.size() > best_len)) {
      best = &b;
      best_len = b.target.size();
    }
  for (const auto& t : root.tmpfs)
    if (path_covers(t.target, path) && t.target.size() > best_len)
      return nullptr;
  return best;
}

/// lstat, and nullopt for anything whose mode bits do not tell the whole
/// story: a file this process cannot stat, a symlink (it resolves in the
/// sandbox's root, not the host's), one with an access ACL.
std::optional<struct stat> plain_file(const std::string& host_path, bool& missing) {
  struct stat st {};
  missing = false;
  if (::lstat(host_path.c_str(), &st) != 0) {
    missing = errno == ENOENT;
    return std::nullopt;
  }
  if (S_ISLNK(st.st_mode))
    return std::nullopt;
  const ssize_t acl = ::lgetxattr(host_path.c_str(), "system.posix_acl_access", nullptr, 0);
  if (acl > 0)
    return std::nullopt;
  return st;
}

/// The permission bits (rwx, 0-7) the kernel applies to `ids` for `st`:
/// the owner's if it owns the file (even when they grant less than the
/// group's), else the group's if one of its groups matches, else others'.
mode_t class_bits(const struct stat& st, const sandbox_host_ids& ids) {
  if (st.st_uid == ids.uid)
    return (st.st_mode >> 6) & 7;
  if (st.st_gid == ids.gid ||
      std::find(ids.groups.begin(), ids.groups.end(), st.st_gid) != ids.groups.end())
    return (st.st_mode >> 3) & 7;
  return st.st_mode & 7;
}

std::string describe(const std::string& verb, const std::string& host_path,
                     const struct stat& st, const sandbox_host_ids& ids) {
  char mode[8];
  std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
  return "host uid " + std::to_string(ids.uid) + " may not " + verb + " " + host_path +
         " (owner " + std::to_string(st.st_uid) + ":" + std::to_string(st.st_gid) + ", mode " +
         mode + ")";
}

std::string parent_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == 0 ? "/" : path.substr(0, slash);
}

} // namespace

outcome<sandbox_host_ids> default_sandbox_host_ids() {
  auto plan = plan_id_maps(id_mapping{});
  if (!plan)
    return plan.error();
  sandbox_host_ids ids;
  ids.uid = plan->outside_uid;
  ids.gid = plan->outside_gid;
  if (!plan->privileged) {
    // Without CAP_SETGID the worker keeps the supervisor's groups.
    const int n = ::getgroups(0, nullptr);
    if (n > 0) {
      ids.groups.resize(static_cast<std::size_t>(n));
      const int got = ::getgroups(n, ids.groups.data());
      ids.groups.resize(got > 0 ? static_cast<std::size_t>(got) : 0);
    }
  }
  return ids;
}

std::optional<std::string> host_refusal(const root_spec& root, const sandbox_host_ids& ids,
                                        std::string_view path, uint64_t access) {
  const bind_mount* b = bind_holding(root, path);
  if (b == nullptr || b->source.empty() || b->source.front() != '/' || access == 0)
    return std::nullopt;
  const std::string host = b->source + std::string(path.substr(b->target.size()));
  const bool at_top = path.size() == b->target.size();
  bool missing = false;

  // Every directory between the bind's top and the file must be searchable
  // (above the top, the host's directories play no part: the bind starts
  // there).
  if (!at_top) {
    std::string dir = b->source;
    const std::string below = host.substr(b->source.size()); // "/a/b/file"
    std::size_t pos = 0;
    while (true) {
      auto st = plain_file(dir, missing);
      if (!st)
        return std::nullopt;
      if ((class_bits(*st, ids) & may_search) == 0)
        return describe("search", dir, *st, ids);
      const auto next = below.find('/', pos + 1);
      if (next == std::string::npos)
        break;
      dir = b->source + below.substr(0, next);
      pos = next;
    }
  }

  // Rights on the directory the name is made in or removed from.
  constexpr uint64_t makes = landlock_fs::make_reg | landlock_fs::make_dir |
                             landlock_fs::make_sym | landlock_fs::make_fifo |
                             landlock_fs::make_sock | landlock_fs::make_char |
                             landlock_fs::make_block;
  constexpr uint64_t removes = landlock_fs::remove_file | landlock_fs::remove_dir;
  if ((access & (makes | removes)) != 0 && !at_top) {
    const std::string dir = parent_of(host);
    auto st = plain_file(dir, missing);
    if (!st)
      return std::nullopt;
    const std::string verb = (access & makes) != 0 ? "create files in" : "remove files from";
    if ((class_bits(*st, ids) & (may_write | may_search)) != (may_write | may_search))
      return describe(verb, dir, *st, ids);
    if ((access & removes) != 0 && (st->st_mode & S_ISVTX) != 0 && st->st_uid != ids.uid) {
      // The sticky bit: only the owner of the file (or of the directory)
      // may remove it.
      auto file = plain_file(host, missing);
      if (file && file->st_uid != ids.uid)
        return describe("remove files of other owners from", dir, *st, ids);
    }
  }

  // Rights on the file itself (an absent one has nothing to decide).
  const uint64_t on_file = access & (landlock_fs::read_file | landlock_fs::read_dir |
                                     landlock_fs::write_file | landlock_fs::truncate |
                                     landlock_fs::execute);
  if (on_file == 0)
    return std::nullopt;
  auto st = plain_file(host, missing);
  if (!st)
    return std::nullopt;
  const mode_t bits = class_bits(*st, ids);
  if ((on_file & (landlock_fs::read_file | landlock_fs::read_dir)) != 0 &&
      (bits & may_read) == 0)
    return describe(S_ISDIR(st->st_mode) ? "list" : "read", host, *st, ids);
  if ((on_file & (landlock_fs::write_file | landlock_fs::truncate)) != 0 &&
      (bits & may_write) == 0)
    return describe("write", host, *st, ids);
  if ((on_file & landlock_fs::execute) != 0 && S_ISREG(st->st_mode) && (bits & may_search) == 0)
    return describe("run", host, *st, ids);
  return std::nullopt;
}

std::vector<std::string> unwritable_binds(const root_spec& root, const sandbox_host_ids& ids) {
  std::vector<std::string> out;
  for (const auto& b : root.binds) {
    if (!b.writable || b.source.empty())
      continue;
    struct stat st {};
    if (::stat(b.source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      continue;
    if (::getxattr(b.source.c_str(), "system.posix_acl_access", nullptr, 0) > 0)
      continue; // an ACL: the mode bits do not tell
    if ((class_bits(st, ids) & (may_write | may_search)) != (may_write | may_search))
      out.push_back(b.target + ": writable by the policy, but " +
                    describe("create files in", b.source, st, ids) +
                    "; the sandbox's code is host uid " + std::to_string(ids.uid) +
                    " (make the directory writable for it, e.g. chown " +
                    std::to_string(ids.uid) + ", or allow only reading)");
  }
  return out;
}

} // namespace castellan::platform
