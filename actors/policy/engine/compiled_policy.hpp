#pragma once

/// @file compiled_policy.hpp
/// A policy compiled for fast checks: an immutable snapshot, shared between
/// actors and threads through `std::shared_ptr<const compiled_policy>` and
/// read without locks.
///
/// fs and exec rules become a trie of path components (see path_trie); each
/// node where a pattern ends carries, per permission, the best vote of the
/// rules ending there, so a check costs one walk of the path. net rules
/// become, per protocol and address family, one hash table per distinct
/// prefix length mapping the masked address to its rules (best vote first,
/// with their port ranges). Host lists become exact and suffix hash sets.
/// Decisions are identical to linear_policy's, including the reported rule.

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/decision.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/policy/engine/net_proto.hpp"
#include "actors/policy/engine/path_trie.hpp"
#include "actors/policy/engine/policy_document.hpp"

namespace castellan::policy {

class compiled_policy {
public:
  /// Compiles a checked, resolved policy (no extends left). `name` is how the
  /// policy is known ("lambda-backend"); `revision` counts reloads.
  static std::shared_ptr<const compiled_policy> compile(policy_document doc, std::string name,
                                                        uint64_t revision = 0);

  /// See linear_policy::check_fs.
  decision check_fs(std::string_view path, fs_access access) const noexcept;
  /// See linear_policy::check_net.
  decision check_net(net_proto proto, const ip_address& address, uint16_t port,
                     std::string_view host = {}) const noexcept;
  decision check_net(net_proto proto, std::string_view address, uint16_t port,
                     std::string_view host = {}) const noexcept;
  /// See linear_policy::check_exec.
  decision check_exec(std::string_view path, std::string_view sha256 = {}) const noexcept;

  const std::string& name() const noexcept { return name_; }
  uint64_t revision() const noexcept { return revision_; }
  /// The effective policy (merged, extends resolved) this was compiled from.
  const policy_document& document() const noexcept { return doc_; }
  /// The effective policy as JSON text (pretty-printed).
  const std::string& json_text() const noexcept { return json_text_; }

  compiled_policy(const compiled_policy&) = delete;
  compiled_policy& operator=(const compiled_policy&) = delete;

private:
  compiled_policy() = default;

  // -- net ---------------------------------------------------------------------
  struct net_entry {
    uint32_t score = 0;
    uint32_t ports_begin = 0; ///< into net_ports_
    uint32_t ports_end = 0;
  };
  struct net_slot {
    uint64_t hi = 0;
    uint64_t lo = 0;
    uint32_t group = UINT32_MAX; ///< (proto, family, prefix) group; UINT32_MAX = empty
    uint32_t entries_begin = 0;  ///< into net_entries_
    uint32_t entries_end = 0;
  };
  /// The prefix lengths used by one (proto, family), longest first.
  struct net_class {
    std::vector<uint8_t> prefixes;
  };

  // -- hosts -------------------------------------------------------------------
  /// Host patterns → smallest list index; exact names and "*."-suffixes.
  class host_index {
  public:
    void insert(std::string_view key, uint32_t index);
    uint32_t find(std::string_view key) const noexcept; ///< UINT32_MAX if absent
    void finalize();

  private:
    struct slot {
      uint64_t hash = 0;
      uint32_t key = UINT32_MAX; ///< into keys_; UINT32_MAX = empty
      uint32_t index = 0;
    };
    std::vector<std::string> keys_;
    std::vector<uint32_t> indexes_;
    std::vector<slot> table_;
    size_t mask_ = 0;
  };
  struct host_set {
    host_index exact;
    host_index suffix;         ///< keys are ".example.com" for "*.example.com"
    uint32_t any = UINT32_MAX; ///< index of "*"
    /// Smallest index of a pattern matching `host` (normalised), UINT32_MAX if none.
    uint32_t first_match(std::string_view host) const noexcept;
  };

  // -- exec --------------------------------------------------------------------
  struct exec_terminal {
    uint32_t best_unpinned = 0;
    std::vector<std::pair<std::string, uint32_t>> pinned; ///< (sha256, score)
  };

  static size_t net_class_index(net_proto p, ip_family f) noexcept {
    return static_cast<size_t>(p) * 2u + static_cast<size_t>(f);
  }
  const net_slot* find_net(uint32_t group, uint64_t hi, uint64_t lo) const noexcept;
  void build_fs();
  void build_net();
  void build_hosts();
  void build_exec();

  std::string name_;
  uint64_t revision_ = 0;
  policy_document doc_;
  std::string json_text_;

  uint32_t fs_default_score_ = 0;
  uint32_t net_default_score_ = 0;
  uint32_t exec_default_score_ = 0;

  detail::path_trie fs_trie_;
  std::vector<uint32_t> fs_payload_of_node_; ///< node → payload index
  std::vector<std::array<uint32_t, fs_perm_count>> fs_payload_;
  std::vector<std::string> fs_pointers_;

  std::array<net_class, 4> net_classes_;
  std::vector<net_slot> net_table_;
  size_t net_mask_ = 0;
  std::vector<net_entry> net_entries_;
  std::vector<port_range> net_ports_;
  std::vector<std::string> net_pointers_;

  host_set deny_hosts_;
  host_set allow_hosts_;
  bool has_allow_list_ = false;
  std::vector<std::string> deny_host_pointers_;
  std::vector<std::string> allow_host_pointers_;

  detail::path_trie exec_trie_;
  std::vector<uint32_t> exec_payload_of_node_;
  std::vector<exec_terminal> exec_payload_;
  std::vector<std::string> exec_pointers_;
};

} // namespace castellan::policy
