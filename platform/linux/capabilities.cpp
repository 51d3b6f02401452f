#include "platform/linux/capabilities.hpp"

#include <linux/capability.h>
#include <linux/securebits.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>

namespace castellan::platform {

namespace {

constexpr unsigned locked_securebits =
  SECBIT_NOROOT | SECBIT_NOROOT_LOCKED | SECBIT_NO_SETUID_FIXUP | SECBIT_NO_SETUID_FIXUP_LOCKED |
  SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE | SECBIT_NO_CAP_AMBIENT_RAISE_LOCKED;

constexpr uint64_t bit(int cap) noexcept { return uint64_t{1} << cap; }

/// The highest capability number the kernel accepts (probed without /proc,
/// once per process: it is a property of the running kernel).
int probe_last_cap() noexcept {
  static const int last = [] {
    int cap = 0;
    while (cap < 63 &&
           ::prctl(PR_CAPBSET_READ, static_cast<unsigned long>(cap + 1), 0, 0, 0) >= 0)
      ++cap;
    return cap;
  }();
  return last;
}

int capget_sets(uint64_t& eff, uint64_t& prm, uint64_t& inh) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0)
    return errno;
  eff = data[0].effective | (uint64_t{data[1].effective} << 32);
  prm = data[0].permitted | (uint64_t{data[1].permitted} << 32);
  inh = data[0].inheritable | (uint64_t{data[1].inheritable} << 32);
  return 0;
}

int capset_sets(uint64_t eff, uint64_t prm, uint64_t inh) noexcept {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  data[0].effective = static_cast<uint32_t>(eff);
  data[1].effective = static_cast<uint32_t>(eff >> 32);
  data[0].permitted = static_cast<uint32_t>(prm);
  data[1].permitted = static_cast<uint32_t>(prm >> 32);
  data[0].inheritable = static_cast<uint32_t>(inh);
  data[1].inheritable = static_cast<uint32_t>(inh >> 32);
  if (::syscall(SYS_capset, &header, data) != 0)
    return errno;
  return 0;
}

} // namespace

uint64_t setup_capability_mask() noexcept {
  return bit(CAP_SYS_ADMIN) | bit(CAP_SETPCAP) | bit(CAP_NET_ADMIN) | bit(CAP_DAC_OVERRIDE);
}

uint64_t overlay_capability_mask() noexcept { return bit(CAP_DAC_OVERRIDE); }

int set_effective_capabilities(uint64_t mask, bool on, bool* was_on) noexcept {
  uint64_t eff = 0, prm = 0, inh = 0;
  if (int err = capget_sets(eff, prm, inh))
    return err;
  if (was_on != nullptr)
    *was_on = (eff & mask) == mask;
  if (on && (prm & mask) != mask)
    return EPERM;
  return capset_sets(on ? (eff | mask) : (eff & ~mask), prm, inh);
}

int keep_ambient_capabilities(uint64_t mask) noexcept {
  uint64_t eff = 0, prm = 0, inh = 0;
  if (int err = capget_sets(eff, prm, inh))
    return err;
  if ((prm & mask) != mask)
    return EPERM;
  if (int err = capset_sets(eff, prm, inh | mask))
    return err;
  for (int cap = 0; cap < 64; ++cap) {
    if ((mask & bit(cap)) == 0)
      continue;
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, static_cast<unsigned long>(cap), 0, 0) != 0)
      return errno;
  }
  return 0;
}

outcome<capabilities_report> current_capabilities() {
  capabilities_report r;
  r.last_cap = probe_last_cap();
  if (int err = capget_sets(r.effective, r.permitted, r.inheritable))
    return errno_failure("capget", err);
  for (int cap = 0; cap <= r.last_cap; ++cap) {
    const auto c = static_cast<unsigned long>(cap);
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) == 1)
      r.bounding |= bit(cap);
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_IS_SET, c, 0, 0) == 1)
      r.ambient |= bit(cap);
  }
  const int bits = ::prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
  if (bits < 0)
    return errno_failure("prctl(PR_GET_SECUREBITS)");
  r.securebits = static_cast<unsigned>(bits);
  return r;
}

outcome<capabilities_report> drop_capabilities() {
  const int last_cap = probe_last_cap();
  // 1. securebits: no capabilities for uid 0 on exec, none kept or regained
  //    through set*id, no ambient raise; all locked.
  const int bits = ::prctl(PR_GET_SECUREBITS, 0, 0, 0, 0);
  if (bits < 0)
    return errno_failure("drop capabilities: prctl(PR_GET_SECUREBITS)");
  if ((static_cast<unsigned>(bits) & locked_securebits) != locked_securebits &&
      ::prctl(PR_SET_SECUREBITS, static_cast<unsigned long>(static_cast<unsigned>(bits) |
                                                            locked_securebits),
              0, 0, 0) != 0)
    return errno_failure("drop capabilities: prctl(PR_SET_SECUREBITS) (needs CAP_SETPCAP)");
  // 2. the bounding set, one capability at a time.
  for (int cap = 0; cap <= last_cap; ++cap) {
    const auto c = static_cast<unsigned long>(cap);
    if (::prctl(PR_CAPBSET_READ, c, 0, 0, 0) != 1)
      continue;
    if (::prctl(PR_CAPBSET_DROP, c, 0, 0, 0) != 0)
      return errno_failure("drop capabilities: prctl(PR_CAPBSET_DROP, " + capability_names(bit(cap)) +
                           ") (needs CAP_SETPCAP)");
  }
  // 3. ambient, then effective/permitted/inheritable.
  if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) != 0)
    return errno_failure("drop capabilities: prctl(PR_CAP_AMBIENT_CLEAR_ALL)");
  if (int err = capset_sets(0, 0, 0))
    return errno_failure("drop capabilities: capset(0, 0, 0)", err);
  // 4. verify.
  auto now = current_capabilities();
  if (!now)
    return now.error().wrap("drop capabilities");
  if (now->effective || now->permitted || now->inheritable || now->ambient || now->bounding)
    return logic_failure("drop capabilities: capabilities remain after the drop (effective " +
                         capability_names(now->effective) + ", bounding " +
                         capability_names(now->bounding) + ")");
  if ((now->securebits & locked_securebits) != locked_securebits)
    return logic_failure("drop capabilities: securebits not locked (" +
                         std::to_string(now->securebits) + ")");
  return now;
}

std::string capability_names(uint64_t mask) {
  static const char* const names[] = {
    "CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_DAC_READ_SEARCH", "CAP_FOWNER", "CAP_FSETID",
    "CAP_KILL", "CAP_SETGID", "CAP_SETUID", "CAP_SETPCAP", "CAP_LINUX_IMMUTABLE",
    "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST", "CAP_NET_ADMIN", "CAP_NET_RAW",
    "CAP_IPC_LOCK", "CAP_IPC_OWNER", "CAP_SYS_MODULE", "CAP_SYS_RAWIO", "CAP_SYS_CHROOT",
    "CAP_SYS_PTRACE", "CAP_SYS_PACCT", "CAP_SYS_ADMIN", "CAP_SYS_BOOT", "CAP_SYS_NICE",
    "CAP_SYS_RESOURCE", "CAP_SYS_TIME", "CAP_SYS_TTY_CONFIG", "CAP_MKNOD", "CAP_LEASE",
    "CAP_AUDIT_WRITE", "CAP_AUDIT_CONTROL", "CAP_SETFCAP", "CAP_MAC_OVERRIDE",
    "CAP_MAC_ADMIN", "CAP_SYSLOG", "CAP_WAKE_ALARM", "CAP_BLOCK_SUSPEND", "CAP_AUDIT_READ",
    "CAP_PERFMON", "CAP_BPF", "CAP_CHECKPOINT_RESTORE"};
  constexpr int named = static_cast<int>(sizeof names / sizeof names[0]);
  std::string out;
  for (int cap = 0; cap < 64; ++cap) {
    if ((mask & bit(cap)) == 0)
      continue;
    if (!out.empty())
      out += ',';
    out += cap < named ? names[cap] : "cap" + std::to_string(cap);
  }
  return out.empty() ? "none" : out;
}

} // namespace castellan::platform
