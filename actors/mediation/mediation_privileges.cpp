#include "actors/mediation/mediation_privileges.hpp"

#include <linux/capability.h>

#include "platform/linux/thread_capabilities.hpp"

namespace castellan::mediation {

namespace {

using platform::thread_capability_sets;

/// This thread's sets when its scope began (valid while `active`).
thread_local thread_capability_sets saved;
thread_local bool active = false;
/// Whether the last change left the effective set empty.
thread_local bool empty = false;

int set_effective(uint64_t effective) noexcept {
  thread_capability_sets s = saved;
  s.effective = effective & saved.permitted;
  const int rc = platform::set_thread_capabilities(s);
  if (rc == 0)
    empty = s.effective == 0;
  else if (s.effective == 0)
    empty = false;
  return rc;
}

} // namespace

without_capabilities::without_capabilities() noexcept {
  if (active) {
    // The set is emptied after every raise and after every change of ids
    // that could refill it (`empty` says whether that worked).
    ok_ = empty;
    return;
  }
  if (platform::get_thread_capabilities(saved) != 0)
    return;
  active = true;
  owner_ = true;
  ok_ = set_effective(0) == 0;
}

without_capabilities::~without_capabilities() {
  if (!owner_)
    return;
  active = false;
  (void)platform::set_thread_capabilities(saved);
}

bool drop_effective_for_good() noexcept {
  if (!active) {
    if (platform::get_thread_capabilities(saved) != 0)
      return false;
    active = true;
  }
  return set_effective(0) == 0;
}

raised_capabilities::raised_capabilities(uint64_t mask) noexcept {
  if (active && mask != 0) {
    (void)set_effective(mask);
    raised_ = true;
  }
}

raised_capabilities::~raised_capabilities() {
  if (raised_)
    (void)set_effective(0);
}

bool drop_effective() noexcept { return !active || set_effective(0) == 0; }

uint64_t effective_now() noexcept {
  thread_capability_sets s;
  return platform::get_thread_capabilities(s) == 0 ? s.effective : ~uint64_t{0};
}

uint64_t ptrace_cap() noexcept { return platform::capability_bit(CAP_SYS_PTRACE); }
uint64_t setid_caps() noexcept {
  return platform::capability_bit(CAP_SETUID) | platform::capability_bit(CAP_SETGID);
}
uint64_t setns_cap() noexcept { return platform::capability_bit(CAP_SYS_ADMIN); }
uint64_t read_search_cap() noexcept { return platform::capability_bit(CAP_DAC_READ_SEARCH); }
uint64_t kill_cap() noexcept { return platform::capability_bit(CAP_KILL); }

} // namespace castellan::mediation
