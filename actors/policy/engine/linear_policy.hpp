#pragma once

/// @file linear_policy.hpp
/// The reference evaluator: every check walks every rule in document order
/// with the plainest matching code. The tests use it as the oracle of
/// compiled_policy, the benchmark as its baseline.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/decision.hpp"
#include "actors/policy/engine/fs_access.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/policy/engine/net_proto.hpp"
#include "actors/policy/engine/policy_document.hpp"

namespace castellan::policy {

class linear_policy {
public:
  /// `doc` must be checked (parse_policy) and resolved (no extends left).
  explicit linear_policy(policy_document doc);

  /// May `access` (one or more fs_perm bits) be exercised on `path`? Each
  /// requested permission is decided on its own; the most restrictive wins.
  decision check_fs(std::string_view path, fs_access access) const noexcept;

  /// May a `proto` connection go to `address`:`port`, naming `host` (empty:
  /// no host name is known)?
  decision check_net(net_proto proto, const ip_address& address, uint16_t port,
                     std::string_view host = {}) const noexcept;
  decision check_net(net_proto proto, std::string_view address, uint16_t port,
                     std::string_view host = {}) const noexcept;

  /// May `path` be executed? `sha256` (64 hex digits, or empty when unknown)
  /// is compared with the digests that rules pin.
  decision check_exec(std::string_view path, std::string_view sha256 = {}) const noexcept;

  const policy_document& document() const noexcept { return doc_; }

private:
  policy_document doc_;
  std::vector<std::vector<std::string>> fs_patterns_;
  std::vector<std::vector<std::string>> exec_patterns_;
  std::vector<std::string> fs_pointers_;
  std::vector<std::string> net_pointers_;
  std::vector<std::string> exec_pointers_;
  std::vector<std::string> deny_host_pointers_;
  std::vector<std::string> allow_host_pointers_;
};

} // namespace castellan::policy
