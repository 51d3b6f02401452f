#pragma once

/// @file request_policy.hpp
/// A policy that comes with one request (`exec_request::policy`, JSON text):
/// validated and merged like a policy file, identified by the digest of its
/// canonical form, turned into the pool configuration it needs, and kept
/// within what the supervisor allows request policies. CAF-free.

#include <sys/types.h>

#include <cstdint>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/policy_document.hpp"
#include "actors/policy/engine/policy_error.hpp"
#include "actors/pool/pool_actor.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// What the supervisor allows request policies, and the pools it starts for
/// them (`supervisor_config::policy_pools`).
struct policy_pool_config {
  /// Pools of request policies alive at once. When one more is needed, the
  /// least recently used idle one is stopped; with none idle the request is
  /// answered `busy`. 0: request policies run only where they need no pool
  /// of their own (same enforcement, or narrowed on a fork-mode pool).
  uint32_t max_pools = 8;
  /// A policy pool without running or queued execs for this long is stopped.
  uint64_t idle_timeout_ms = 60000;
  /// Warm workers of each policy pool (0: as many as the default pool).
  uint32_t pool_size = 1;
  /// Where `extends` names resolve (empty: the install layout's policies/).
  std::string policy_dir;
  /// Host paths (and everything beneath) a request policy may grant, i.e.
  /// bind into its sandbox. Rules inside the default root (/usr, /etc, /tmp,
  /// …) bind nothing and are always allowed. Empty: none.
  std::vector<std::string> bindable_paths;
  /// Whether a request policy may allow network (its pool then reaches the
  /// egress proxy, which decides with that policy).
  bool allow_network = false;
  /// Request policy texts whose resolution is remembered.
  std::size_t cache_size = 256;
};

/// The pool a request policy's pools are made from: `default_pool` without
/// what its own policy added (binds, masks, execution grants, denied calls,
/// decided calls, network), keeping its layers, limits, interpreter, mode
/// and workers; `cfg.pool_size` workers when set.
pool_config policy_pool_template(const pool_config& default_pool, const policy_pool_config& cfg);

/// How a request with this policy runs on one configured pool.
struct policy_route {
  enum class kind : uint8_t {
    same,     ///< the pool enforces exactly this policy already
    narrowed, ///< on the pool, its exec's process narrowed by `tightening`
    own_pool, ///< in the pool of this policy
  };
  kind how = kind::own_pool;
  std::string tightening; ///< the TIGHTEN payload (narrowed)
  std::string why;        ///< why not same/narrowed (own_pool), for the log
};

/// A resolved request policy.
struct request_policy {
  std::string hash; ///< sha256 (hex) of the canonical form of the merged policy
  std::string name; ///< "policy-" and the first 12 hex digits of `hash`
  pool_config pool; ///< the template with this policy applied (named `name`)
  /// Routes already decided, by configured pool name.
  std::map<std::string, policy_route> routes;
};

/// The directory where a client's policy's `extends` names resolve:
/// `policy_dir`, or the install layout's policies/ when that is empty.
std::string client_policy_dir(const std::string& policy_dir);

/// A client's policy (`file` names it in errors) with its `extends`
/// resolved in `policy_dir` (client_policy_dir) and merged under it. An
/// entry that is a path, not a name, is refused (at `/extends/<i>`) before
/// anything is read: nothing on the supervisor's host is read on a client's
/// say-so beyond that directory. `files_read` receives the policy files
/// its `extends` read.
policy::validated<policy::policy_document>
resolve_client_policy(const policy::policy_document& doc, std::string_view file,
                      const std::string& policy_dir, std::vector<std::string>* files_read = nullptr);

/// The `extends` entries of `doc` that are paths rather than names of the
/// policy directory, as errors at `/extends/<i>` of `file`.
std::vector<policy::policy_error> extends_by_path(const policy::policy_document& doc,
                                                  std::string_view file);

/// Parses `text`, resolves its `extends` (names of `cfg.policy_dir` only:
/// nothing on the supervisor's host is read on a client's say-so beyond
/// that directory), validates it, computes its hash, applies it to
/// `tmpl` and checks it against what `cfg` allows:
/// - no layer weaker than the template's (`plugins`), no limit above it;
/// - binds only below `cfg.bindable_paths`; network only with
///   `cfg.allow_network`.
/// Every problem is reported, one per line, as
/// `file: pointer: value: reason (rule)` (file "request policy" for the
/// text itself). `files_read` receives the policy files its `extends` read.
outcome<request_policy> resolve_request_policy(std::string_view text, const pool_config& tmpl,
                                               const policy_pool_config& cfg,
                                               std::vector<std::string>* files_read = nullptr);

/// request policy texts → their resolution, most recently used kept. An
/// entry is used again only while every file its `extends` read is
/// unchanged (same inode, size and modification time).
class request_policy_cache {
public:
  explicit request_policy_cache(std::size_t capacity) : capacity_(capacity) {}

  /// The resolution of `text` (from the cache, or resolved now). Errors are
  /// not cached.
  outcome<std::shared_ptr<request_policy>> resolve(std::string_view text, const pool_config& tmpl,
                                                   const policy_pool_config& cfg);

  std::size_t size() const noexcept { return entries_.size(); }

private:
  struct stamp {
    std::string path;
    dev_t dev = 0;
    ino_t ino = 0;
    off_t size = 0;
    int64_t mtime_ns = 0;
    bool operator==(const stamp& o) const noexcept {
      return dev == o.dev && ino == o.ino && size == o.size && mtime_ns == o.mtime_ns;
    }
  };
  struct entry {
    std::shared_ptr<request_policy> policy;
    std::vector<stamp> files;
    std::list<std::string>::iterator lru;
  };
  static std::vector<stamp> stamps_of(const std::vector<std::string>& paths);

  std::size_t capacity_;
  std::map<std::string, entry> entries_; ///< by sha256 of the text
  std::list<std::string> lru_;           ///< most recent first
};

} // namespace castellan
