#include "actors/pool/sandbox_fs_rights.hpp"

#include <algorithm>
#include <optional>

#include "actors/policy/engine/path.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/linux/host_permissions.hpp"

namespace castellan {

namespace pol = castellan::policy;

namespace {

constexpr uint64_t read_rights = platform::landlock_fs::read_file | platform::landlock_fs::read_dir;
/// The rights Landlock accepts on a rule whose path is a file.
constexpr uint64_t file_rights = platform::landlock_fs::execute |
                                 platform::landlock_fs::write_file |
                                 platform::landlock_fs::read_file |
                                 platform::landlock_fs::truncate | platform::landlock_fs::ioctl_dev;

/// The rights the policy allows (or warns about) at `path`, one right at a
/// time, and those a rule of it denies there.
struct policy_rights {
  uint64_t allowed = 0;
  uint64_t denied_by_rule = 0;
};

policy_rights rights_at(const pol::compiled_policy& policy, std::string_view path) {
  policy_rights out;
  for (unsigned bit = 0; bit < pol::fs_perm_count; ++bit) {
    const pol::fs_access right = pol::fs_access{1} << bit;
    const pol::decision d = policy.check_fs(path, right);
    if (d.verdict != pol::action::deny)
      out.allowed |= right;
    else if (d.source == pol::decision_source::rule)
      out.denied_by_rule |= right;
  }
  return out;
}

/// What the workspace grant gives: files and directories made, changed and
/// removed; no execute, no device nodes.
constexpr uint64_t workspace_rights =
  read_rights | platform::landlock_fs::write_file | platform::landlock_fs::truncate |
  platform::landlock_fs::remove_dir | platform::landlock_fs::remove_file |
  platform::landlock_fs::make_dir | platform::landlock_fs::make_reg |
  platform::landlock_fs::make_sym | platform::landlock_fs::make_fifo |
  platform::landlock_fs::make_sock | platform::landlock_fs::refer;

/// The base grants covering `path`, without what a rule of the policy denies.
uint64_t base_rights_at(const platform::root_spec& root, std::string_view path,
                        const policy_rights& policy) {
  uint64_t out = 0;
  for (const auto& g : base_grants_for(root))
    if (platform::path_covers(g.path, path))
      out |= g.access;
  return out & ~policy.denied_by_rule;
}

/// `path` with the root's symlinks followed (the kernel follows them before
/// Landlock looks; the policy speaks of the path as written).
std::string through_symlinks(const platform::root_spec& root, std::string path) {
  for (int hops = 0; hops < 8; ++hops) {
    bool moved = false;
    for (const auto& s : root.symlinks) {
      if (!platform::path_covers(s.path, path) || s.path == "/")
        continue;
      std::string target = s.points_to;
      if (target.empty())
        continue;
      if (target.front() != '/')
        target = s.path.substr(0, s.path.find_last_of('/') + 1) + target;
      auto normal = pol::normalize_path(target + path.substr(s.path.size()));
      if (!normal)
        return path;
      path = *normal;
      moved = true;
      break;
    }
    if (!moved)
      break;
  }
  return path;
}

/// False when `path` (symlinks followed) lies on the root's own tmpfs,
/// outside every mount, and the root builder makes nothing there: the
/// sandbox has no such file. True when it might exist (inside a bind, a
/// tmpfs, /proc or /dev, or a path the builder creates).
bool may_exist(const platform::root_spec& root, const std::string& path) {
  auto inside = [&](const std::string& top) { return platform::path_covers(top, path); };
  auto above = [&](const std::string& below) { return platform::path_covers(path, below); };
  for (const auto& b : root.binds)
    if (inside(b.target) || above(b.target))
      return true;
  for (const auto& t : root.tmpfs)
    if (inside(t.target) || above(t.target))
      return true;
  for (const auto& f : root.files)
    if (above(f.path))
      return true;
  for (const auto& s : root.symlinks)
    if (above(s.path))
      return true;
  if ((root.proc && (inside("/proc") || above("/proc"))) ||
      (root.minimal_dev && (inside("/dev") || above("/dev"))))
    return true;
  return false;
}

} // namespace

const std::vector<base_grant>& base_grants() {
  static const std::vector<base_grant> grants = {
    {sandbox_harness_dir, read_rights, "the harness the interpreter starts from"},
    {"/proc", read_rights, "its own processes, in the sandbox's own /proc"},
  };
  return grants;
}

std::vector<base_grant> base_grants_for(const platform::root_spec& root) {
  std::vector<base_grant> out = base_grants();
  for (const auto& b : root.binds)
    if (b.target == sandbox_workspace_dir && b.writable)
      out.push_back({sandbox_workspace_dir, workspace_rights,
                     "the workspace the sandbox was given, read and write"});
  return out;
}

void limit_landlock_to_policy(platform::sandbox_spec& spec, const pol::compiled_policy& policy) {
  auto& rules = spec.landlock.paths;
  // Each generated file (/etc/passwd, /etc/hosts, …) on its own: a rule on
  // its directory would decide them all alike.
  for (const auto& f : spec.root.files)
    if (std::none_of(rules.begin(), rules.end(),
                     [&](const platform::landlock_path_rule& r) { return r.path == f.path; }))
      rules.push_back({f.path, platform::landlock_fs::read_file, false});
  for (auto& rule : rules) {
    const policy_rights p = rights_at(policy, rule.path);
    rule.access &= p.allowed | base_rights_at(spec.root, rule.path, p);
  }
  for (auto& rule : rules) {
    const bool is_file = std::any_of(spec.root.files.begin(), spec.root.files.end(),
                                     [&](const auto& f) { return f.path == rule.path; });
    if (is_file)
      rule.access &= file_rights;
  }
  rules.erase(std::remove_if(rules.begin(), rules.end(),
                             [](const platform::landlock_path_rule& r) { return r.access == 0; }),
              rules.end());
}

sandbox_decision decide_in_sandbox(const platform::sandbox_spec& spec,
                                   const pol::compiled_policy& policy, std::string_view path,
                                   pol::fs_access access) {
  pol::decision d = policy.check_fs(path, access);
  sandbox_decision out{d.verdict, std::string(d.pointer)};
  auto normal = pol::normalize_path(path);
  if (!normal || access == 0 || !spec.landlock.enabled)
    return out;
  // The kernel decides on the file a path resolves to: through the root's
  // own symlinks (/bin -> usr/bin), the policy's rules for the target apply.
  const std::string resolved = through_symlinks(spec.root, *normal);
  if (resolved != *normal) {
    d = policy.check_fs(resolved, access);
    out = {d.verdict, std::string(d.pointer) + " (" + *normal + " is " + resolved + ")"};
  }
  if (d.verdict != pol::action::deny && !may_exist(spec.root, resolved))
    return {pol::action::deny, "sandbox: " + resolved + " is not in the sandbox's root"};
  uint64_t granted = 0;
  const platform::landlock_path_rule* nearest = nullptr;
  for (const auto& rule : spec.landlock.paths) {
    if (!platform::path_covers(rule.path, resolved))
      continue;
    granted |= rule.access;
    if (nearest == nullptr || rule.path.size() > nearest->path.size())
      nearest = &rule;
  }
  const uint64_t missing = access & ~granted;
  // Past Landlock and the policy, the host's own owner and mode bits decide
  // on files behind a bind (a writable bind of a directory the sandbox's
  // host uid does not own, say).
  auto host_refuses = [&]() -> std::optional<std::string> {
    auto ids = platform::default_sandbox_host_ids();
    if (!ids)
      return std::nullopt;
    return platform::host_refusal(spec.root, *ids, resolved, access);
  };
  if (d.verdict != pol::action::deny) {
    if (missing == 0) {
      if (auto why = host_refuses())
        return {pol::action::deny, "sandbox: " + *why};
      return out;
    }
    std::string names;
    for (const auto& n : platform::landlock_fs_names(missing))
      names += (names.empty() ? "" : ",") + n;
    return {pol::action::deny, "sandbox: the root grants no " + names + " on " +
                                 (nearest != nullptr ? nearest->path : resolved)};
  }
  if (missing == 0 && d.source == pol::decision_source::default_action) {
    for (const auto& g : base_grants_for(spec.root))
      if (platform::path_covers(g.path, resolved) && (access & ~g.access) == 0) {
        if (auto why = host_refuses())
          return {pol::action::deny, "sandbox: " + *why};
        return {pol::action::allow, "castellan base: " + g.path + " (" + g.why + ")"};
      }
  }
  return out;
}

} // namespace castellan
