#pragma once

/// @file access_control.hpp
/// Who may do what through the API: the tokens of the tokens file (their
/// names, digests, pool allowlists and concurrency limits) and the
/// decisions made from them. A token is known by its digest, not by its
/// place in the file, so that a reload (replace()) keeps the execs in
/// flight counted against the token that admitted them. Not synchronised:
/// api_service calls it under its own lock.

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/api/bearer_token.hpp"

namespace castellan::api {

/// One `[[tokens]]` entry of the tokens file.
struct token_entry {
  std::string name;      ///< shown in logs; never the secret
  token_digest sha256{}; ///< the SHA-256 of the token
  /// The pools this token may use; nullopt: all.
  std::optional<std::vector<std::string>> pools;
  /// Execs in flight at once for this token; 0: no per-token limit.
  uint32_t max_concurrent = 0;
};

/// What a request's credentials are.
struct caller {
  enum class kind : uint8_t {
    anonymous, ///< no token, where none is needed (unix socket; TCP without a tokens file)
    token,     ///< a valid token: `token` is its index
    missing,   ///< no token where one is needed (401)
    invalid,   ///< a token that matches no entry, or a malformed Authorization header (401)
  };
  kind type = kind::anonymous;
  token_digest digest{}; ///< the token's (type == token)
  std::string name;      ///< its entry's name when it was identified (type == token)

  bool allowed() const { return type == kind::anonymous || type == kind::token; }
};

/// What admit() decided.
enum class admission : uint8_t {
  admitted,         ///< counted in flight; release() it when answered
  pool_not_allowed, ///< 403: the pool is outside the token's allowlist
  too_many_execs,   ///< 429: the token's max_concurrent are in flight
};

class access_control {
public:
  /// No tokens file: every request is anonymous unless it sends a token,
  /// which is then invalid.
  access_control() = default;
  /// A tokens file's entries (possibly none).
  explicit access_control(std::vector<token_entry> tokens);

  /// Whether a tokens file is configured.
  bool has_tokens_file() const { return tokens_file_; }

  /// The caller a request is: `authorization` is its Authorization header
  /// (empty: none); `token_required` when it came where only a token
  /// admits it (a TCP listener, with a tokens file). A header that is sent
  /// must hold a valid token wherever it arrives. Every entry is compared,
  /// in constant time each, whichever matches.
  caller identify(std::string_view authorization, bool token_required) const;

  /// Whether `who` may use `pool`: always without a token, else when the
  /// token is still in the file and its allowlist (if any) names it.
  bool may_use(const caller& who, std::string_view pool) const;

  /// Decides whether `who` may start an exec on `pool` (the pool the
  /// request names, or the default pool) and counts it in flight if so.
  admission admit(const caller& who, std::string_view pool);

  /// An exec admit() counted is answered.
  void release(const caller& who);

  /// The token's entry as the tokens file says now; nullptr when `who`
  /// has no token, or its token left the file since it was identified.
  const token_entry* entry(const caller& who) const;

  /// The token's execs in flight.
  uint32_t in_flight(const caller& who) const;

  /// The tokens file was read again: its entries replace these. A token
  /// that stays keeps its execs in flight (counted against its new
  /// limit); one that left admits nothing more, and its execs in flight
  /// still release when answered.
  void replace(std::vector<token_entry> tokens);

private:
  bool tokens_file_ = false;
  std::vector<token_entry> tokens_;
  std::map<token_digest, uint32_t> in_flight_; ///< by token; no entry: none
};

} // namespace castellan::api
