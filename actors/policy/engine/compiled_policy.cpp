#include "actors/policy/engine/compiled_policy.hpp"

#include <algorithm>
#include <map>
#include <tuple>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/policy/engine/json_format.hpp"
#include "actors/policy/engine/path.hpp"

namespace castellan::policy {

namespace {

constexpr uint32_t none = UINT32_MAX;

uint64_t fnv1a(std::string_view s) noexcept {
  return detail::path_trie::hash(s);
}

struct split_address {
  uint64_t hi = 0;
  uint64_t lo = 0;
};

split_address split(const ip_address& a) noexcept {
  split_address out;
  if (a.family == ip_family::v4) {
    out.lo = (uint64_t{a.bytes[0]} << 24) | (uint64_t{a.bytes[1]} << 16) |
             (uint64_t{a.bytes[2]} << 8) | uint64_t{a.bytes[3]};
    return out;
  }
  for (size_t i = 0; i < 8; ++i) {
    out.hi = (out.hi << 8) | a.bytes[i];
    out.lo = (out.lo << 8) | a.bytes[8 + i];
  }
  return out;
}

split_address mask(split_address a, ip_family f, unsigned prefix) noexcept {
  if (f == ip_family::v4) {
    a.lo = prefix == 0 ? 0 : (a.lo & ((0xFFFFFFFFull << (32u - prefix)) & 0xFFFFFFFFull));
    return a;
  }
  if (prefix <= 64) {
    a.hi = prefix == 0 ? 0 : (a.hi & (~0ull << (64u - prefix)));
    a.lo = 0;
  } else {
    a.lo &= ~0ull << (128u - prefix);
  }
  return a;
}

size_t net_hash(uint32_t group, uint64_t hi, uint64_t lo) noexcept {
  uint64_t x = hi * 0x9E3779B97F4A7C15ull ^ lo * 0xC2B2AE3D27D4EB4Full ^ group;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return static_cast<size_t>(x);
}

decision rule_decision(uint32_t score, const std::vector<std::string>& pointers) noexcept {
  if ((score & 0x3FFFFFFu) == 0)
    return decision{detail::score_action(score), decision_source::default_action, -1,
                    detail::default_pointer};
  const uint32_t i = detail::score_order(score);
  return decision{detail::score_action(score), decision_source::rule, static_cast<int32_t>(i),
                  pointers[i]};
}

} // namespace

// -- host index ----------------------------------------------------------------

void compiled_policy::host_index::insert(std::string_view key, uint32_t index) {
  for (size_t i = 0; i < keys_.size(); ++i)
    if (keys_[i] == key) {
      indexes_[i] = std::min(indexes_[i], index);
      return;
    }
  keys_.emplace_back(key);
  indexes_.push_back(index);
}

void compiled_policy::host_index::finalize() {
  size_t capacity = 8;
  while (capacity < keys_.size() * 2)
    capacity *= 2;
  table_.assign(capacity, slot{});
  mask_ = capacity - 1;
  for (size_t k = 0; k < keys_.size(); ++k) {
    const uint64_t h = fnv1a(keys_[k]);
    size_t i = static_cast<size_t>(h) & mask_;
    while (table_[i].key != UINT32_MAX)
      i = (i + 1) & mask_;
    table_[i] = slot{h, static_cast<uint32_t>(k), indexes_[k]};
  }
}

uint32_t compiled_policy::host_index::find(std::string_view key) const noexcept {
  if (keys_.empty())
    return none;
  const uint64_t h = fnv1a(key);
  size_t i = static_cast<size_t>(h) & mask_;
  for (;;) {
    const slot& s = table_[i];
    if (s.key == UINT32_MAX)
      return none;
    if (s.hash == h && keys_[s.key] == key)
      return s.index;
    i = (i + 1) & mask_;
  }
}

uint32_t compiled_policy::host_set::first_match(std::string_view host) const noexcept {
  if (host.empty())
    return none;
  uint32_t best = std::min(any, exact.find(host));
  // "*.example.com" is stored as ".example.com"; try every proper suffix
  // that starts at a dot.
  for (size_t p = 1; p < host.size(); ++p)
    if (host[p] == '.')
      best = std::min(best, suffix.find(host.substr(p)));
  return best;
}

// -- compile -------------------------------------------------------------------

std::shared_ptr<const compiled_policy>
compiled_policy::compile(policy_document doc, std::string name, uint64_t revision) {
  std::shared_ptr<compiled_policy> p{new compiled_policy};
  p->name_ = std::move(name);
  p->revision_ = revision;
  p->doc_ = std::move(doc);
  p->json_text_ = format_json(to_json(p->doc_));
  p->fs_default_score_ = detail::default_score(p->doc_.effective_fs_default());
  p->net_default_score_ = detail::default_score(p->doc_.effective_net_default());
  p->exec_default_score_ = detail::default_score(p->doc_.effective_exec_default());
  p->build_fs();
  p->build_net();
  p->build_hosts();
  p->build_exec();
  return p;
}

void compiled_policy::build_fs() {
  const auto& rules = doc_.fs_rules;
  for (size_t i = 0; i < rules.size(); ++i) {
    const uint32_t node = fs_trie_.insert(pattern_components(rules[i].path));
    if (fs_payload_of_node_.size() < fs_trie_.node_count())
      fs_payload_of_node_.resize(fs_trie_.node_count(), none);
    if (fs_payload_of_node_[node] == none) {
      fs_payload_of_node_[node] = static_cast<uint32_t>(fs_payload_.size());
      fs_payload_.emplace_back();
      fs_payload_.back().fill(0);
    }
    auto& best = fs_payload_[fs_payload_of_node_[node]];
    const uint32_t score = detail::vote_score(rules[i].verdict, static_cast<uint32_t>(i));
    for (unsigned bit = 0; bit < fs_perm_count; ++bit)
      if ((rules[i].perms & (fs_access{1u} << bit)) != 0)
        best[bit] = std::max(best[bit], score);
    fs_pointers_.push_back("/fs/rules/" + std::to_string(i));
  }
  fs_payload_of_node_.resize(fs_trie_.node_count(), none);
  fs_trie_.finalize();
}

void compiled_policy::build_net() {
  // (group, hi, lo) → rule indexes, in document order.
  std::map<std::tuple<uint32_t, uint64_t, uint64_t>, std::vector<uint32_t>> buckets;
  const auto& rules = doc_.net_rules;
  for (size_t i = 0; i < rules.size(); ++i) {
    const auto& r = rules[i];
    const size_t cls = net_class_index(r.proto, r.cidr.network.family);
    auto& prefixes = net_classes_[cls].prefixes;
    if (std::find(prefixes.begin(), prefixes.end(), r.cidr.prefix) == prefixes.end())
      prefixes.push_back(r.cidr.prefix);
    const uint32_t group = static_cast<uint32_t>(cls * 256u + r.cidr.prefix);
    const split_address a = split(r.cidr.network);
    buckets[{group, a.hi, a.lo}].push_back(static_cast<uint32_t>(i));
    net_pointers_.push_back("/net/rules/" + std::to_string(i));
  }
  for (auto& c : net_classes_)
    std::sort(c.prefixes.begin(), c.prefixes.end(), std::greater<>());
  size_t capacity = 16;
  while (capacity < buckets.size() * 2)
    capacity *= 2;
  net_table_.assign(capacity, net_slot{});
  net_mask_ = capacity - 1;
  for (const auto& [key, members] : buckets) {
    const auto [group, hi, lo] = key;
    net_slot slot;
    slot.hi = hi;
    slot.lo = lo;
    slot.group = group;
    slot.entries_begin = static_cast<uint32_t>(net_entries_.size());
    std::vector<net_entry> entries;
    for (uint32_t i : members) {
      net_entry e;
      e.score = detail::vote_score(rules[i].verdict, i);
      e.ports_begin = static_cast<uint32_t>(net_ports_.size());
      net_ports_.insert(net_ports_.end(), rules[i].ports.begin(), rules[i].ports.end());
      e.ports_end = static_cast<uint32_t>(net_ports_.size());
      entries.push_back(e);
    }
    // Best vote first: the first entry whose ports match is the bucket's answer.
    std::sort(entries.begin(), entries.end(),
              [](const net_entry& x, const net_entry& y) { return x.score > y.score; });
    net_entries_.insert(net_entries_.end(), entries.begin(), entries.end());
    slot.entries_end = static_cast<uint32_t>(net_entries_.size());
    size_t i = net_hash(group, hi, lo) & net_mask_;
    while (net_table_[i].group != UINT32_MAX)
      i = (i + 1) & net_mask_;
    net_table_[i] = slot;
  }
}

void compiled_policy::build_hosts() {
  auto fill = [](host_set& set, const std::vector<std::string>& patterns,
                 std::vector<std::string>& pointers, const char* base) {
    for (size_t i = 0; i < patterns.size(); ++i) {
      const auto& p = patterns[i];
      const auto idx = static_cast<uint32_t>(i);
      if (p == "*")
        set.any = std::min(set.any, idx);
      else if (p.size() >= 2 && p[0] == '*' && p[1] == '.')
        set.suffix.insert(std::string_view{p}.substr(1), idx);
      else
        set.exact.insert(p, idx);
      pointers.push_back(std::string{base} + std::to_string(i));
    }
    set.exact.finalize();
    set.suffix.finalize();
  };
  fill(deny_hosts_, doc_.hosts.deny, deny_host_pointers_, "/net/hosts/deny/");
  has_allow_list_ = doc_.hosts.allow.has_value();
  static const std::vector<std::string> empty;
  fill(allow_hosts_, has_allow_list_ ? *doc_.hosts.allow : empty, allow_host_pointers_,
       "/net/hosts/allow/");
}

void compiled_policy::build_exec() {
  const auto& rules = doc_.exec_rules;
  for (size_t i = 0; i < rules.size(); ++i) {
    const uint32_t node = exec_trie_.insert(pattern_components(rules[i].path));
    if (exec_payload_of_node_.size() < exec_trie_.node_count())
      exec_payload_of_node_.resize(exec_trie_.node_count(), none);
    if (exec_payload_of_node_[node] == none) {
      exec_payload_of_node_[node] = static_cast<uint32_t>(exec_payload_.size());
      exec_payload_.emplace_back();
    }
    auto& t = exec_payload_[exec_payload_of_node_[node]];
    const uint32_t score = detail::vote_score(rules[i].verdict, static_cast<uint32_t>(i));
    if (rules[i].sha256)
      t.pinned.emplace_back(*rules[i].sha256, score);
    else
      t.best_unpinned = std::max(t.best_unpinned, score);
    exec_pointers_.push_back("/exec/rules/" + std::to_string(i));
  }
  exec_payload_of_node_.resize(exec_trie_.node_count(), none);
  exec_trie_.finalize();
}

// -- checks --------------------------------------------------------------------

decision compiled_policy::check_fs(std::string_view path, fs_access access) const noexcept {
  if (access == 0 || (access & ~fs_access_all) != 0)
    return detail::invalid_decision();
  try {
    path_components comps;
    if (!comps.assign(path))
      return detail::invalid_decision();
    std::array<uint32_t, fs_perm_count> best{};
    fs_trie_.match(comps, [&](uint32_t node) {
      const auto& p = fs_payload_[fs_payload_of_node_[node]];
      for (fs_access m = access; m != 0; m &= m - 1) {
        const auto bit = static_cast<unsigned>(__builtin_ctz(m));
        best[bit] = std::max(best[bit], p[bit]);
      }
    });
    uint32_t overall = 0;
    for (fs_access m = access; m != 0; m &= m - 1) {
      const auto bit = static_cast<unsigned>(__builtin_ctz(m));
      overall = std::max(overall, best[bit] != 0 ? best[bit] : fs_default_score_);
    }
    return rule_decision(overall, fs_pointers_);
  } catch (...) {
    return detail::invalid_decision();
  }
}

const compiled_policy::net_slot* compiled_policy::find_net(uint32_t group, uint64_t hi,
                                                           uint64_t lo) const noexcept {
  size_t i = net_hash(group, hi, lo) & net_mask_;
  for (;;) {
    const net_slot& s = net_table_[i];
    if (s.group == UINT32_MAX)
      return nullptr;
    if (s.group == group && s.hi == hi && s.lo == lo)
      return &s;
    i = (i + 1) & net_mask_;
  }
}

decision compiled_policy::check_net(net_proto proto, const ip_address& address, uint16_t port,
                                    std::string_view host) const noexcept {
  const uint32_t n_rules = static_cast<uint32_t>(doc_.net_rules.size());
  const uint32_t n_deny = static_cast<uint32_t>(doc_.hosts.deny.size());
  uint32_t best = 0;
  const size_t cls = net_class_index(proto, address.family);
  const split_address full = split(address);
  for (uint8_t prefix : net_classes_[cls].prefixes) {
    const split_address m = mask(full, address.family, prefix);
    const net_slot* s = find_net(static_cast<uint32_t>(cls * 256u + prefix), m.hi, m.lo);
    if (s == nullptr)
      continue;
    for (uint32_t e = s->entries_begin; e < s->entries_end; ++e) {
      const net_entry& entry = net_entries_[e];
      if (entry.score <= best)
        break;
      bool hit = false;
      for (uint32_t r = entry.ports_begin; r < entry.ports_end && !hit; ++r)
        hit = net_ports_[r].contains(port);
      if (hit) {
        best = entry.score;
        break;
      }
    }
  }
  // Host name: lower-case it into a stack buffer when it fits.
  char buf[256];
  std::string heap;
  std::string_view h;
  if (!host.empty()) {
    if (host.back() == '.')
      host.remove_suffix(1);
    char* out = buf;
    if (host.size() > sizeof(buf)) {
      try {
        heap.resize(host.size());
      } catch (...) {
        return detail::invalid_decision();
      }
      out = heap.data();
    }
    for (size_t i = 0; i < host.size(); ++i) {
      const char c = host[i];
      out[i] = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
    }
    h = std::string_view{out, host.size()};
  }
  if (!h.empty()) {
    const uint32_t j = deny_hosts_.first_match(h);
    if (j != none)
      best = std::max(best, detail::vote_score(action::deny, n_rules + j));
  }
  if (has_allow_list_) {
    const uint32_t k = allow_hosts_.first_match(h);
    if (k != none)
      best = std::max(best, detail::vote_score(action::allow, n_rules + n_deny + 1 + k));
    else
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
  return decision{a, decision_source::host_allow, static_cast<int32_t>(k), allow_host_pointers_[k]};
}

decision compiled_policy::check_net(net_proto proto, std::string_view address, uint16_t port,
                                    std::string_view host) const noexcept {
  auto addr = parse_ip(address);
  if (!addr)
    return detail::invalid_decision();
  return check_net(proto, *addr, port, host);
}

decision compiled_policy::check_exec(std::string_view path,
                                     std::string_view sha256) const noexcept {
  try {
    path_components comps;
    if (!comps.assign(path))
      return detail::invalid_decision();
    // Lower-case the digest; anything but 64 hex digits is "unknown".
    char digest_buf[64];
    std::string_view digest;
    if (sha256.size() == 64) {
      bool ok = true;
      for (size_t i = 0; i < 64 && ok; ++i) {
        char c = sha256[i];
        if (c >= 'A' && c <= 'F')
          c = static_cast<char>(c - 'A' + 'a');
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        digest_buf[i] = c;
      }
      if (ok)
        digest = std::string_view{digest_buf, 64};
    }
    uint32_t best = 0;
    exec_trie_.match(comps, [&](uint32_t node) {
      const auto& t = exec_payload_[exec_payload_of_node_[node]];
      best = std::max(best, t.best_unpinned);
      if (!digest.empty())
        for (const auto& [pin, score] : t.pinned)
          if (pin == digest)
            best = std::max(best, score);
    });
    return rule_decision(best != 0 ? best : exec_default_score_, exec_pointers_);
  } catch (...) {
    return detail::invalid_decision();
  }
}

} // namespace castellan::policy
