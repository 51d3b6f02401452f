#include "actors/api/session_registry.hpp"

namespace castellan::api {

void session_registry::replace(const std::vector<session_info>& live) {
  std::unordered_map<std::string, entry> next;
  next.reserve(live.size());
  for (const auto& s : live)
    next.emplace(s.id, entry{s.owner, s.pool});
  sessions_ = std::move(next);
}

void session_registry::erase(const std::string& id) {
  sessions_.erase(id);
}

const session_registry::entry* session_registry::find(const std::string& id,
                                                      const caller& who) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end())
    return nullptr;
  if (who.type == caller::kind::token && it->second.owner != who.name)
    return nullptr;
  return &it->second;
}

std::string owner_of(const caller& who) {
  return who.type == caller::kind::token ? who.name : std::string{};
}

} // namespace castellan::api
