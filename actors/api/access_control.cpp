#include "actors/api/access_control.hpp"

#include <algorithm>

namespace castellan::api {

access_control::access_control(std::vector<token_entry> tokens)
    : tokens_file_(true), tokens_(std::move(tokens)) {}

void access_control::replace(std::vector<token_entry> tokens) {
  tokens_file_ = true;
  tokens_ = std::move(tokens);
}

const token_entry* access_control::entry(const caller& who) const {
  if (who.type != caller::kind::token)
    return nullptr;
  for (const auto& e : tokens_)
    if (same_digest(e.sha256, who.digest))
      return &e;
  return nullptr;
}

caller access_control::identify(std::string_view authorization, bool token_required) const {
  caller c;
  if (authorization.empty()) {
    c.type = token_required ? caller::kind::missing : caller::kind::anonymous;
    return c;
  }
  c.type = caller::kind::invalid;
  auto token = bearer_credentials(authorization);
  if (!token)
    return c;
  const token_digest d = digest_of(*token);
  // Every entry is compared, so the time says nothing about which matched
  // or how many digests there are before it.
  bool found = false;
  for (const auto& e : tokens_) {
    const bool same = same_digest(d, e.sha256);
    if (same && !found) {
      found = true;
      c.digest = e.sha256;
      c.name = e.name;
    }
  }
  if (found)
    c.type = caller::kind::token;
  return c;
}

bool access_control::may_use(const caller& who, std::string_view pool) const {
  if (who.type != caller::kind::token)
    return true;
  const token_entry* e = entry(who);
  return e != nullptr &&
         (!e->pools || std::find(e->pools->begin(), e->pools->end(), pool) != e->pools->end());
}

admission access_control::admit(const caller& who, std::string_view pool) {
  if (who.type != caller::kind::token)
    return admission::admitted;
  if (!may_use(who, pool))
    return admission::pool_not_allowed;
  const uint32_t limit = entry(who)->max_concurrent;
  uint32_t& count = in_flight_[who.digest];
  if (limit != 0 && count >= limit)
    return admission::too_many_execs;
  ++count;
  return admission::admitted;
}

void access_control::release(const caller& who) {
  if (who.type != caller::kind::token)
    return;
  auto it = in_flight_.find(who.digest);
  if (it != in_flight_.end() && --it->second == 0)
    in_flight_.erase(it);
}

uint32_t access_control::in_flight(const caller& who) const {
  if (who.type != caller::kind::token)
    return 0;
  auto it = in_flight_.find(who.digest);
  return it == in_flight_.end() ? 0 : it->second;
}

} // namespace castellan::api
