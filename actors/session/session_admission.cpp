#include "actors/session/session_admission.hpp"

#include "actors/session/workspace_name.hpp"

#include <sys/random.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>

namespace castellan {

namespace {

bool resolve_ms(uint64_t asked, uint64_t fallback, uint64_t most, const char* what,
                uint64_t& out, session_refusal& why) {
  out = asked == 0 ? fallback : asked;
  if (out > most) {
    why.reason = std::string(what) + " of " + std::to_string(out) +
                 " ms is above the maximum of " + std::to_string(most) + " ms";
    return false;
  }
  return true;
}

} // namespace

bool admit_session(const session_limits& limits, const session_options& opts, std::size_t total,
                   std::size_t of_owner, session_info& out, session_refusal& why) {
  why = {};
  if (total >= limits.max_sessions) {
    why.busy = true;
    why.reason = "busy: " + std::to_string(total) + " sessions exist, the maximum (" +
                 std::to_string(limits.max_sessions) + ")";
    return false;
  }
  if (of_owner >= limits.max_per_owner) {
    why.busy = true;
    why.reason = "busy: owner '" + opts.owner + "' holds " + std::to_string(of_owner) +
                 " sessions, the maximum per owner (" + std::to_string(limits.max_per_owner) +
                 ")";
    return false;
  }
  if (!opts.workspace.empty()) {
    // A name in the supervisor's store, never a path: the store alone
    // decides where it is on the host.
    if (auto ok = validate_workspace_name(opts.workspace); !ok) {
      why.reason = ok.error().message;
      return false;
    }
  }
  out.owner = opts.owner;
  out.workspace = opts.workspace;
  return resolve_ms(opts.idle_ttl_ms, limits.default_idle_ttl_ms, limits.max_idle_ttl_ms,
                    "an idle TTL", out.idle_ttl_ms, why) &&
         resolve_ms(opts.max_lifetime_ms, limits.default_max_lifetime_ms, limits.max_lifetime_ms,
                    "a maximum lifetime", out.max_lifetime_ms, why);
}

std::string new_session_id() {
  unsigned char bytes[8] = {};
  std::size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n > 0)
      got += static_cast<std::size_t>(n);
    else if (n < 0 && errno != EINTR)
      std::abort(); // getrandom exists since Linux 3.17 and cannot fail otherwise
  }
  char text[2 * sizeof bytes + 1];
  for (std::size_t i = 0; i < sizeof bytes; ++i)
    std::snprintf(text + 2 * i, 3, "%02x", bytes[i]);
  return std::string("s-") + text;
}

} // namespace castellan
