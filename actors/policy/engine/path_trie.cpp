#include "actors/policy/engine/path_trie.hpp"

namespace castellan::policy::detail {

path_trie::path_trie() {
  nodes_.emplace_back(); // the root: "/"
}

uint32_t path_trie::child_of(uint32_t parent, const std::string& component) {
  if (component == "**") {
    if (nodes_[parent].is_star_star)
      return parent; // "/a/**/**" is "/a/**"
    if (nodes_[parent].star_star == npos) {
      node n;
      n.label = component;
      n.is_star_star = true;
      nodes_.push_back(std::move(n));
      nodes_[parent].star_star = static_cast<uint32_t>(nodes_.size() - 1);
    }
    return nodes_[parent].star_star;
  }
  if (is_glob_component(component)) {
    for (uint32_t g : nodes_[parent].globs)
      if (nodes_[g].label == component)
        return g;
    node n;
    n.label = component;
    nodes_.push_back(std::move(n));
    const auto id = static_cast<uint32_t>(nodes_.size() - 1);
    nodes_[parent].globs.push_back(id);
    return id;
  }
  auto key = std::make_pair(parent, component);
  if (auto it = literal_edges_.find(key); it != literal_edges_.end())
    return it->second;
  node n;
  n.label = component;
  nodes_.push_back(std::move(n));
  const auto id = static_cast<uint32_t>(nodes_.size() - 1);
  nodes_[parent].has_literals = true;
  literal_edges_.emplace(std::move(key), id);
  return id;
}

uint32_t path_trie::insert(const std::vector<std::string>& components) {
  uint32_t cur = 0;
  for (const auto& c : components)
    cur = child_of(cur, c);
  nodes_[cur].terminal = true;
  return cur;
}

void path_trie::finalize() {
  size_t capacity = 16;
  while (capacity < literal_edges_.size() * 2)
    capacity *= 2;
  table_.assign(capacity, slot{});
  mask_ = capacity - 1;
  for (const auto& [key, child] : literal_edges_) {
    const uint64_t h = hash(key.second);
    size_t i = static_cast<size_t>(mix(h, key.first)) & mask_;
    while (table_[i].parent != npos)
      i = (i + 1) & mask_;
    table_[i] = slot{h, key.first, child};
  }
  literal_edges_.clear();
}

} // namespace castellan::policy::detail
