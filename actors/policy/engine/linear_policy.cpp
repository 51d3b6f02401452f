#include "actors/policy/engine/linear_policy.hpp"

#include <algorithm>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/policy/engine/path.hpp"

namespace castellan::policy {

namespace {

// Does the pattern cover a prefix of the path (a rule covers everything below it)?
bool covers(const std::vector<std::string>& pat, size_t i, const path_components& path, size_t j) {
  if (i == pat.size())
    return true;
  if (pat[i] == "**") {
    for (size_t k = j; k <= path.size(); ++k)
      if (covers(pat, i + 1, path, k))
        return true;
    return false;
  }
  if (j == path.size())
    return false;
  return match_component(pat[i], path[j]) && covers(pat, i + 1, path, j + 1);
}

std::string lower_digest(std::string_view sha256) {
  if (sha256.size() != 64)
    return {};
  std::string out{sha256};
  for (auto& c : out) {
    if (c >= 'A' && c <= 'F')
      c = static_cast<char>(c - 'A' + 'a');
    else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
      return {};
  }
  return out;
}

} // namespace

linear_policy::linear_policy(policy_document doc) : doc_(std::move(doc)) {
  for (size_t i = 0; i < doc_.fs_rules.size(); ++i) {
    fs_patterns_.push_back(pattern_components(doc_.fs_rules[i].path));
    fs_pointers_.push_back("/fs/rules/" + std::to_string(i));
  }
  for (size_t i = 0; i < doc_.net_rules.size(); ++i)
    net_pointers_.push_back("/net/rules/" + std::to_string(i));
  for (size_t i = 0; i < doc_.exec_rules.size(); ++i) {
    exec_patterns_.push_back(pattern_components(doc_.exec_rules[i].path));
    exec_pointers_.push_back("/exec/rules/" + std::to_string(i));
  }
  for (size_t i = 0; i < doc_.hosts.deny.size(); ++i)
    deny_host_pointers_.push_back("/net/hosts/deny/" + std::to_string(i));
  if (doc_.hosts.allow)
    for (size_t i = 0; i < doc_.hosts.allow->size(); ++i)
      allow_host_pointers_.push_back("/net/hosts/allow/" + std::to_string(i));
}

decision linear_policy::check_fs(std::string_view path, fs_access access) const noexcept {
  if (access == 0 || (access & ~fs_access_all) != 0)
    return detail::invalid_decision();
  try {
    path_components comps;
    if (!comps.assign(path))
      return detail::invalid_decision();
    uint32_t overall = 0;
    for (unsigned bit = 0; bit < fs_perm_count; ++bit) {
      const fs_access b = fs_access{1u} << bit;
      if ((access & b) == 0)
        continue;
      // The default decides a permission only when no rule matches it.
      uint32_t best = 0;
      for (size_t i = 0; i < doc_.fs_rules.size(); ++i) {
        const auto& r = doc_.fs_rules[i];
        if ((r.perms & b) != 0 && covers(fs_patterns_[i], 0, comps, 0))
          best = std::max(best, detail::vote_score(r.verdict, static_cast<uint32_t>(i)));
      }
      if (best == 0)
        best = detail::default_score(doc_.effective_fs_default());
      overall = std::max(overall, best);
    }
    if ((overall & 0x3FFFFFFu) == 0)
      return decision{detail::score_action(overall), decision_source::default_action, -1,
                      detail::default_pointer};
    const uint32_t i = detail::score_order(overall);
    return decision{detail::score_action(overall), decision_source::rule, static_cast<int32_t>(i),
                    fs_pointers_[i]};
  } catch (...) {
    return detail::invalid_decision();
  }
}

decision linear_policy::check_net(net_proto proto, const ip_address& address, uint16_t port,
                                  std::string_view host) const noexcept {
  try {
    const uint32_t n_rules = static_cast<uint32_t>(doc_.net_rules.size());
    const uint32_t n_deny = static_cast<uint32_t>(doc_.hosts.deny.size());
    uint32_t best = 0;
    for (uint32_t i = 0; i < n_rules; ++i) {
      const auto& r = doc_.net_rules[i];
      if (r.proto == proto && r.cidr.contains(address) && ports_contain(r.ports, port))
        best = std::max(best, detail::vote_score(r.verdict, i));
    }
    const std::string h = normalize_host(host);
    if (!h.empty()) {
      for (uint32_t j = 0; j < n_deny; ++j)
        if (host_matches(doc_.hosts.deny[j], h))
          best = std::max(best, detail::vote_score(action::deny, n_rules + j));
    }
    if (doc_.hosts.allow) {
      bool listed = false;
      const auto& allow = *doc_.hosts.allow;
      for (uint32_t k = 0; k < allow.size() && !h.empty(); ++k) {
        if (host_matches(allow[k], h)) {
          best = std::max(best, detail::vote_score(action::allow, n_rules + n_deny + 1 + k));
          listed = true;
          break;
        }
      }
      if (!listed)
        best = std::max(best, detail::vote_score(action::deny, n_rules + n_deny));
    }
    if (best == 0)
      return decision{doc_.effective_net_default(), decision_source::default_action, -1,
                      detail::default_pointer};
    const action a = detail::score_action(best);
    const uint32_t order = detail::score_order(best);
    if (order < n_rules)
      return decision{a, decision_source::rule, static_cast<int32_t>(order), net_pointers_[order]};
    if (order < n_rules + n_deny)
      return decision{a, decision_source::host_deny, static_cast<int32_t>(order - n_rules),
                      deny_host_pointers_[order - n_rules]};
    if (order == n_rules + n_deny)
      return decision{a, decision_source::host_not_allowed, -1, detail::not_allowed_pointer};
    const uint32_t k = order - n_rules - n_deny - 1;
    return decision{a, decision_source::host_allow, static_cast<int32_t>(k),
                    allow_host_pointers_[k]};
  } catch (...) {
    return detail::invalid_decision();
  }
}

decision linear_policy::check_net(net_proto proto, std::string_view address, uint16_t port,
                                  std::string_view host) const noexcept {
  auto addr = parse_ip(address);
  if (!addr)
    return detail::invalid_decision();
  return check_net(proto, *addr, port, host);
}

decision linear_policy::check_exec(std::string_view path, std::string_view sha256) const noexcept {
  try {
    path_components comps;
    if (!comps.assign(path))
      return detail::invalid_decision();
    const std::string digest = lower_digest(sha256);
    uint32_t best = 0;
    for (size_t i = 0; i < doc_.exec_rules.size(); ++i) {
      const auto& r = doc_.exec_rules[i];
      if (r.sha256 && (digest.empty() || *r.sha256 != digest))
        continue;
      if (covers(exec_patterns_[i], 0, comps, 0))
        best = std::max(best, detail::vote_score(r.verdict, static_cast<uint32_t>(i)));
    }
    if (best == 0)
      return decision{doc_.effective_exec_default(), decision_source::default_action, -1,
                      detail::default_pointer};
    const uint32_t i = detail::score_order(best);
    return decision{detail::score_action(best), decision_source::rule, static_cast<int32_t>(i),
                    exec_pointers_[i]};
  } catch (...) {
    return detail::invalid_decision();
  }
}

} // namespace castellan::policy
