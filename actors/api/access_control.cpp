#include "actors/api/access_control.hpp"

#include <algorithm>

namespace castellan::api {

access_control::access_control(std::vector<token_entry> tokens)
    : tokens_file_(true), tokens_(std::move(tokens)), in_flight_(tokens_.size(), 0) {}

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
  for (std::size_t i = 0; i < tokens_.size(); ++i) {
    const bool same = same_digest(d, tokens_[i].sha256);
    if (same && !found) {
      found = true;
      c.token = i;
    }
  }
  if (found)
    c.type = caller::kind::token;
  return c;
}

bool access_control::may_use(const caller& who, std::string_view pool) const {
  if (who.type != caller::kind::token)
    return true;
  const auto& e = tokens_[who.token];
  return !e.pools || std::find(e.pools->begin(), e.pools->end(), pool) != e.pools->end();
}

admission access_control::admit(const caller& who, std::string_view pool) {
  if (who.type != caller::kind::token)
    return admission::admitted;
  const auto& e = tokens_[who.token];
  if (!may_use(who, pool))
    return admission::pool_not_allowed;
  if (e.max_concurrent != 0 && in_flight_[who.token] >= e.max_concurrent)
    return admission::too_many_execs;
  ++in_flight_[who.token];
  return admission::admitted;
}

void access_control::release(const caller& who) {
  if (who.type == caller::kind::token && in_flight_[who.token] > 0)
    --in_flight_[who.token];
}

uint32_t access_control::in_flight(const caller& who) const {
  return who.type == caller::kind::token ? in_flight_[who.token] : 0;
}

} // namespace castellan::api
