#pragma once

/// @file session_registry.hpp
/// The sessions the API serves, each one's owner and pool, as the
/// supervisor last listed them: what the I/O thread decides a by-id request
/// from before it goes on (a token reaches only the sessions it made; an
/// exec in one counts against its token on the session's pool). The
/// supervisor is the truth: the registry is replaced by each list it
/// answers (a create, `GET /v1/sessions`), and a session it no longer knows
/// (reaped, destroyed) leaves when it says so. Not synchronised: api_service
/// calls it under its own lock.

#include <string>
#include <unordered_map>
#include <vector>

#include "actors/api/access_control.hpp"
#include "actors/session/session_messages.hpp"

namespace castellan::api {

class session_registry {
public:
  struct entry {
    std::string owner; ///< session_info::owner: its token's name, "" without one
    std::string pool;  ///< the pool it was created from
  };

  /// The supervisor's list now: it replaces what the registry held.
  void replace(const std::vector<session_info>& live);

  /// The session is gone (destroyed, or the supervisor knows it no more).
  void erase(const std::string& id);

  /// The session `id` as `who` may reach it: nullptr when there is none,
  /// or it is another token's (a caller without a token reaches every
  /// session, as it may cancel every exec).
  const entry* find(const std::string& id, const caller& who) const;

  std::size_t size() const { return sessions_.size(); }

private:
  std::unordered_map<std::string, entry> sessions_;
};

/// The owner a session made by `who` gets: its token's name, "" without one.
std::string owner_of(const caller& who);

} // namespace castellan::api
