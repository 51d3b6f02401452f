#include "actors/supervisor/request_policy.hpp"

#include <sys/stat.h>

#include <algorithm>

#include <nlohmann/json.hpp>

#include "actors/policy/engine/policy_canonical.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "actors/sha256.hpp"
#include "platform/install_layout.hpp"

namespace castellan {

namespace {

/// How errors name the request's own text.
constexpr const char* request_file = "request policy";

std::string json_quoted(const std::string& s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// "file#/pointer" (a rule's origin) as the file and pointer of an error.
policy::policy_error error_at(const std::string& origin, std::string value, std::string message) {
  const auto hash = origin.find('#');
  if (hash == std::string::npos)
    return {request_file, origin, std::move(value), std::move(message)};
  return {origin.substr(0, hash), origin.substr(hash + 1), std::move(value), std::move(message)};
}

failure to_failure(const std::vector<policy::policy_error>& errors) {
  std::string text;
  for (const auto& e : errors)
    text += (text.empty() ? "" : "\n") + e.describe();
  return logic_failure(std::move(text));
}

/// True when `pattern` (an absolute, normalised rule path) lies at or below
/// `root`, component-wise.
bool beneath(const std::string& pattern, const std::string& root) {
  if (root == "/")
    return true;
  return pattern == root || pattern.rfind(root + "/", 0) == 0;
}

std::string joined(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v)
    out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "none" : out;
}

/// What a request policy may not do beyond the template and the
/// supervisor's settings.
std::vector<policy::policy_error> check_ceiling(const policy::policy_document& doc,
                                                const pool_config& tmpl, const pool_config& got,
                                                const policy_pool_config& cfg) {
  std::vector<policy::policy_error> errors;
  auto layer = [&](const char* name, bool weaker) {
    if (weaker)
      errors.push_back({request_file, std::string("/plugins/") + name, "",
                        std::string("a request policy may not switch off or weaken the ") + name +
                            " layer the supervisor's pools enforce (ceiling)"});
  };
  const auto& t = tmpl.sandbox;
  const auto& g = got.sandbox;
  layer("namespaces", tmpl.isolation == platform::isolation_mode::namespaces &&
                          got.isolation != platform::isolation_mode::namespaces);
  layer("landlock",
        (t.landlock && !g.landlock) || (!t.landlock_best_effort && g.landlock_best_effort));
  layer("seccomp", t.seccomp && !g.seccomp);
  layer("cgroups", (t.cgroups && !g.cgroups) || (!t.cgroups_best_effort && g.cgroups_best_effort));

  auto limit = [&](const char* name, uint64_t allowed, uint64_t asked) {
    // 0 is "unlimited" for the cgroup limits of the template.
    if (allowed != 0 && (asked == 0 || asked > allowed))
      errors.push_back(
          {request_file, std::string("/limits/") + name, std::to_string(asked),
           "above what the supervisor's pools allow (" + std::to_string(allowed) + ") (ceiling)"});
  };
  limit("memory_bytes", tmpl.limits.memory_bytes, got.limits.memory_bytes);
  limit("pids", tmpl.limits.pids, got.limits.pids);
  limit("cpu_percent", tmpl.limits.cpu_percent, got.limits.cpu_percent);
  limit("timeout_ms", tmpl.default_timeout_ms, got.default_timeout_ms);
  limit("stdout_bytes", tmpl.stdout_limit, got.stdout_limit);
  limit("stderr_bytes", tmpl.stderr_limit, got.stderr_limit);
  limit("code_bytes", tmpl.code_limit, got.code_limit);

  // Binds: an allow rule outside the default root mounts that host path.
  for (std::size_t i = 0; i < doc.fs_rules.size(); ++i) {
    const auto& rule = doc.fs_rules[i];
    if (rule.verdict == policy::action::deny || in_default_root(rule.path))
      continue;
    const bool ok = std::any_of(cfg.bindable_paths.begin(), cfg.bindable_paths.end(),
                                [&](const std::string& root) { return beneath(rule.path, root); });
    if (!ok)
      errors.push_back(
          error_at(rule.origin.empty() ? "/fs/rules/" + std::to_string(i) : rule.origin,
                   json_quoted(rule.path),
                   "grants a host path outside the sandbox's default root that "
                   "request policies may not bind (bindable: " +
                       joined(cfg.bindable_paths) + ") (ceiling)"));
  }
  if (got.egress_policy && !cfg.allow_network)
    errors.push_back({request_file, "/net", "",
                      "allows network, which the supervisor does not allow request policies "
                      "(ceiling)"});
  return errors;
}

} // namespace

std::string client_policy_dir(const std::string& policy_dir) {
  if (!policy_dir.empty())
    return policy_dir;
  if (auto layout = platform::find_install_layout(); layout)
    return layout->policies_dir;
  return {};
}

std::vector<policy::policy_error> extends_by_path(const policy::policy_document& doc,
                                                  std::string_view file) {
  std::vector<policy::policy_error> errors;
  for (std::size_t i = 0; i < doc.extends.size(); ++i)
    if (policy::is_extends_path(doc.extends[i]))
      errors.push_back({std::string(file), "/extends/" + std::to_string(i),
                        json_quoted(doc.extends[i]),
                        "a client's policy extends policies of the supervisor's policy "
                        "directory by name only (extends)"});
  return errors;
}

policy::validated<policy::policy_document>
resolve_client_policy(const policy::policy_document& doc, std::string_view file,
                      const std::string& policy_dir, std::vector<std::string>* files_read) {
  // Only names of the policy directory: a path would let a client make the
  // supervisor read any file it can (and echo parts of it in errors).
  auto errors = extends_by_path(doc, file);
  if (!errors.empty())
    return errors;
  const std::string dir = client_policy_dir(policy_dir);
  if (dir.empty() && !doc.extends.empty())
    // Names would resolve in the daemon's working directory.
    return policy::policy_error{std::string(file), "/extends/0", json_quoted(doc.extends[0]),
                                "the supervisor has no policy directory to resolve names in "
                                "(extends)"};
  return policy::resolve_extends(doc, dir, dir, files_read);
}

pool_config policy_pool_template(const pool_config& default_pool, const policy_pool_config& cfg) {
  // A request policy's pool runs under that policy alone.
  pool_config t = pool_without_policy(default_pool);
  if (cfg.pool_size != 0)
    t.size = cfg.pool_size;
  return t;
}

outcome<request_policy> resolve_request_policy(std::string_view text, const pool_config& tmpl,
                                               const policy_pool_config& cfg,
                                               std::vector<std::string>* files_read) {
  auto doc = policy::parse_policy(text, request_file);
  if (!doc)
    return doc.to_failure();
  auto merged = resolve_client_policy(*doc, request_file, cfg.policy_dir, files_read);
  if (!merged)
    return merged.to_failure();
  std::vector<policy::policy_error> errors;

  request_policy out;
  out.hash = sha256_hex(policy::canonical_text(*merged));
  if (out.hash.empty())
    return logic_failure("request policy: sha256 is not available");
  out.name = "policy-" + out.hash.substr(0, 12);
  out.pool = tmpl;
  out.pool.name = out.name;
  out.pool.policy_name = out.name;
  // Decisions and the proxy name the policy by its source.
  merged->source = out.name;
  if (auto ok = apply_policy(*merged, out.pool); !ok)
    return ok.error().wrap(request_file);
  out.pool.policy_name = out.name;
  errors = check_ceiling(*merged, tmpl, out.pool, cfg);
  if (!errors.empty())
    return to_failure(errors);
  return out;
}

std::vector<request_policy_cache::stamp>
request_policy_cache::stamps_of(const std::vector<std::string>& paths) {
  std::vector<stamp> out;
  for (const auto& p : paths) {
    stamp s;
    s.path = p;
    struct stat st {};
    if (::stat(p.c_str(), &st) == 0) {
      s.dev = st.st_dev;
      s.ino = st.st_ino;
      s.size = st.st_size;
      s.mtime_ns = int64_t{st.st_mtim.tv_sec} * 1'000'000'000 + st.st_mtim.tv_nsec;
    }
    out.push_back(std::move(s));
  }
  return out;
}

outcome<std::shared_ptr<request_policy>>
request_policy_cache::resolve(std::string_view text, const pool_config& tmpl,
                              const policy_pool_config& cfg) {
  const std::string key = sha256_hex(text);
  if (auto it = entries_.find(key); it != entries_.end()) {
    std::vector<std::string> paths;
    for (const auto& s : it->second.files)
      paths.push_back(s.path);
    if (stamps_of(paths) == it->second.files) {
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      return it->second.policy;
    }
    lru_.erase(it->second.lru);
    entries_.erase(it); // a policy it extends changed: resolve it again
  }
  std::vector<std::string> files;
  auto resolved = resolve_request_policy(text, tmpl, cfg, &files);
  if (!resolved)
    return resolved.error();
  auto policy = std::make_shared<request_policy>(std::move(*resolved));
  if (capacity_ == 0)
    return policy;
  while (entries_.size() >= capacity_) {
    entries_.erase(lru_.back());
    lru_.pop_back();
  }
  lru_.push_front(key);
  entries_[key] = entry{policy, stamps_of(files), lru_.begin()};
  return policy;
}

} // namespace castellan
