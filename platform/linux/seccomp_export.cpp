#include "platform/linux/seccomp_export.hpp"

#include <linux/filter.h>
#include <seccomp.h>

#include <map>
#include <memory>

#include "platform/linux/seccomp_filter.hpp"

namespace castellan::platform {

namespace {

struct ctx_deleter {
  void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
};
using ctx_ptr = std::unique_ptr<void, ctx_deleter>;

} // namespace

outcome<exported_filter> export_seccomp_filter(const std::vector<std::string>& deny,
                                               const std::vector<std::string>& kill,
                                               int deny_errno) {
  if (deny_errno <= 0 || deny_errno > 4095)
    return logic_failure("seccomp export: deny_errno " + std::to_string(deny_errno) +
                         " is not an errno");
  exported_filter out;
  // Resolve every name; kill wins over deny for the same call.
  std::map<int, std::pair<bool, std::string>> rules; // nr → (kill, name)
  auto add = [&](const std::string& name, bool is_kill) -> outcome<void> {
    const int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name.c_str());
    if (nr == __NR_SCMP_ERROR)
      return logic_failure("seccomp export: '" + name + "' is not a system call libseccomp knows");
    if (nr < 0) { // a pseudo number: a call of other architectures only
      out.not_on_this_arch.push_back(name);
      return {};
    }
    auto [it, fresh] = rules.emplace(nr, std::make_pair(is_kill, name));
    if (!fresh && is_kill)
      it->second = {true, name};
    return {};
  };
  for (const auto& n : deny)
    if (auto r = add(n, false); !r)
      return r.error();
  for (const auto& n : kill)
    if (auto r = add(n, true); !r)
      return r.error();

  ctx_ptr ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx)
    return logic_failure("seccomp export: seccomp_init failed");
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS))
    return errno_failure("seccomp export: bad-architecture action", -rc);
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  const uint32_t deny_action = SCMP_ACT_ERRNO(static_cast<uint16_t>(deny_errno));
  for (const auto& [nr, rule] : rules) {
    const uint32_t action = rule.first ? SCMP_ACT_KILL_PROCESS : deny_action;
    if (int rc = seccomp_rule_add(ctx.get(), action, nr, 0))
      return errno_failure("seccomp export: rule for " + rule.second, -rc);
    (rule.first ? out.killed : out.denied).push_back(rule.second);
  }

  auto prog = export_bpf(ctx.get());
  if (!prog)
    return prog.error().wrap("seccomp export");
  out.program.assign(reinterpret_cast<const char*>(prog->data()),
                     prog->size() * sizeof(sock_filter));
  return out;
}

} // namespace castellan::platform
