#pragma once

/// @file path_trie.hpp
/// Rule path patterns compiled into one trie per domain, matched against a
/// path as a small NFA: literal components are one hash probe, glob
/// components are tried on the nodes that have them, and a `**` node keeps
/// itself active while it consumes components. Built once, then read-only
/// (safe to share between threads).

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "actors/policy/engine/path.hpp"

namespace castellan::policy::detail {

/// A growable array of node ids that lives on the stack while small.
class node_set {
public:
  static constexpr size_t inline_capacity = 32;

  void clear() noexcept {
    size_ = 0;
    heap_.clear();
  }
  size_t size() const noexcept { return size_; }
  uint32_t operator[](size_t i) const noexcept {
    return i < inline_capacity ? inline_[i] : heap_[i - inline_capacity];
  }
  void push(uint32_t id) {
    if (size_ < inline_capacity)
      inline_[size_] = id;
    else
      heap_.push_back(id);
    ++size_;
  }
  bool contains(uint32_t id) const noexcept {
    for (size_t i = 0; i < size_; ++i)
      if ((*this)[i] == id)
        return true;
    return false;
  }

private:
  uint32_t inline_[inline_capacity]; // written before read; not cleared on the hot path
  size_t size_ = 0;
  std::vector<uint32_t> heap_;
};

class path_trie {
public:
  static constexpr uint32_t npos = UINT32_MAX;

  path_trie();

  /// Adds a pattern (its components, see pattern_components) and returns the
  /// id of the node where it ends. Consecutive `**` are one `**`.
  uint32_t insert(const std::vector<std::string>& components);

  /// Builds the lookup table; call once after the last insert.
  void finalize();

  /// Calls `visit(node_id)` for each node where some pattern ends that covers
  /// `path` (possibly more than once for the same node).
  template <class Visit> void match(const path_components& path, Visit&& visit) const {
    node_set a;
    node_set b;
    node_set* active = &a;
    node_set* next = &b;
    add(*active, 0);
    visit_terminals(*active, visit);
    for (size_t j = 0; j < path.size() && active->size() != 0; ++j) {
      const std::string_view c = path[j];
      const uint64_t h = hash(c);
      next->clear();
      for (size_t k = 0; k < active->size(); ++k) {
        const uint32_t s = (*active)[k];
        const node& n = nodes_[s];
        if (n.is_star_star && !next->contains(s))
          next->push(s);
        if (n.has_literals) {
          const uint32_t child = find_literal(s, h, c);
          if (child != npos)
            add(*next, child);
        }
        for (uint32_t g : n.globs)
          if (match_component(nodes_[g].label, c))
            add(*next, g);
      }
      std::swap(active, next);
      visit_terminals(*active, visit);
    }
  }

  bool is_terminal(uint32_t id) const noexcept { return nodes_[id].terminal; }
  size_t node_count() const noexcept { return nodes_.size(); }

  /// A fast hash of a component, eight bytes at a time (components are
  /// short, and a byte-wise hash is a chain of multiplications per byte).
  static uint64_t hash(std::string_view s) noexcept {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ s.size();
    size_t i = 0;
    for (; i + 8 <= s.size(); i += 8) {
      uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      h = (h ^ w) * 0xFF51AFD7ED558CCDull;
      h ^= h >> 32;
    }
    // The tail byte by byte: a variable-length memcpy is a library call.
    uint64_t w = 0;
    for (unsigned shift = 0; i < s.size(); ++i, shift += 8)
      w |= static_cast<uint64_t>(static_cast<unsigned char>(s[i])) << shift;
    h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
    h ^= h >> 29;
    return h;
  }

private:
  struct node {
    std::string label;           ///< the component (pattern text for glob nodes)
    uint32_t star_star = npos;   ///< child reached through "**"
    std::vector<uint32_t> globs; ///< children whose label contains '*'
    bool is_star_star = false;
    bool has_literals = false;
    bool terminal = false;
  };

  struct slot {
    uint64_t hash = 0;
    uint32_t parent = npos; ///< npos: empty slot
    uint32_t child = npos;
  };

  void add(node_set& set, uint32_t id) const {
    // Only "**" nodes can be reached twice in one step (self-loop + parent).
    if (nodes_[id].is_star_star && set.contains(id))
      return;
    set.push(id);
    if (nodes_[id].star_star != npos)
      add(set, nodes_[id].star_star);
  }

  template <class Visit> void visit_terminals(const node_set& set, Visit& visit) const {
    for (size_t k = 0; k < set.size(); ++k)
      if (nodes_[set[k]].terminal)
        visit(set[k]);
  }

  static uint64_t mix(uint64_t h, uint32_t parent) noexcept {
    uint64_t x = h ^ (static_cast<uint64_t>(parent) * 0x9E3779B97F4A7C15ull);
    x ^= x >> 29;
    return x;
  }

  uint32_t find_literal(uint32_t parent, uint64_t h, std::string_view c) const noexcept {
    if (table_.empty())
      return npos;
    size_t i = static_cast<size_t>(mix(h, parent)) & mask_;
    for (;;) {
      const slot& s = table_[i];
      if (s.parent == npos)
        return npos;
      if (s.parent == parent && s.hash == h && nodes_[s.child].label == c)
        return s.child;
      i = (i + 1) & mask_;
    }
  }

  uint32_t child_of(uint32_t parent, const std::string& component);

  std::vector<node> nodes_;
  std::vector<slot> table_;
  size_t mask_ = 0;
  std::map<std::pair<uint32_t, std::string>, uint32_t> literal_edges_; ///< until finalize
};

} // namespace castellan::policy::detail
