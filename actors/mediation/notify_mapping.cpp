#include "actors/mediation/notify_mapping.hpp"

#include <algorithm>
#include <initializer_list>

#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/network_layers.hpp"

namespace castellan {

namespace pol = policy;
using mediation::read_only_perms;

bool decides_fs_rule(const pol::fs_rule& rule) {
  if (rule.verdict == pol::action::warn)
    return true;
  return rule.verdict == pol::action::deny && rule.path != "/" && rule.path != "/**";
}

platform::notify_spec notify_spec_for(const pol::policy_document& doc) {
  platform::notify_spec spec;
  auto add = [&](std::initializer_list<const char*> names) {
    for (const char* name : names)
      if (std::find(spec.syscalls.begin(), spec.syscalls.end(), name) == spec.syscalls.end())
        spec.syscalls.emplace_back(name);
  };
  auto perm = [](pol::fs_perm p) { return pol::to_access(p); };
  pol::fs_access decided = 0;
  if (doc.effective_fs_default() == pol::action::warn)
    decided = pol::fs_access_all;
  for (const auto& rule : doc.fs_rules)
    if (decides_fs_rule(rule))
      decided |= rule.perms;
  auto any = [&](pol::fs_access mask) { return (decided & mask) != 0; };

  const pol::fs_access opens = read_only_perms | perm(pol::fs_perm::write_file) |
                               perm(pol::fs_perm::truncate) | perm(pol::fs_perm::make_reg);
  if (any(opens)) {
    add({"open", "openat", "creat", "openat2"});
    spec.open_writes_only = !any(read_only_perms);
  }
  // The supervisor creates with the caller's umask, which it reads once per
  // sandbox and then only again after a umask(2) (continued, only noted).
  const pol::fs_access makes = perm(pol::fs_perm::make_reg) | perm(pol::fs_perm::make_dir) |
                               perm(pol::fs_perm::make_fifo) | perm(pol::fs_perm::make_sock) |
                               perm(pol::fs_perm::make_char) | perm(pol::fs_perm::make_block);
  if (any(opens) || any(makes))
    add({"umask"});
  // Calls that change the tree. A rename or a hard link gives an inode a
  // new name, which must not escape any decided rule: they follow every
  // decided permission. The others follow the permission they exercise.
  if (decided != 0)
    add({"rename", "renameat", "renameat2", "link", "linkat"});
  if (any(perm(pol::fs_perm::remove_file)))
    add({"unlink", "unlinkat"});
  if (any(perm(pol::fs_perm::remove_dir)))
    add({"rmdir", "unlinkat"});
  if (any(perm(pol::fs_perm::make_dir)))
    add({"mkdir", "mkdirat"});
  if (any(perm(pol::fs_perm::make_sym)))
    add({"symlink", "symlinkat"});
  if (any(perm(pol::fs_perm::make_reg) | perm(pol::fs_perm::make_fifo) |
          perm(pol::fs_perm::make_sock) | perm(pol::fs_perm::make_char) |
          perm(pol::fs_perm::make_block)))
    add({"mknod", "mknodat"});
  if (any(perm(pol::fs_perm::truncate) | perm(pol::fs_perm::write_file)))
    add({"truncate"});
  // A pathname socket is a file: binding one creates it (make_sock),
  // connecting or sending to one writes to it (write_file, as the kernel's
  // own permission check has it).
  if (any(perm(pol::fs_perm::make_sock)))
    add({"bind"});
  if (any(perm(pol::fs_perm::write_file)))
    add({"connect", "sendto", "sendmsg", "sendmmsg"});

  // Net calls: see mediates_net (network_layers.hpp).
  if (mediates_net(doc))
    add({"connect", "bind", "sendto", "sendmsg", "sendmmsg"});

  bool exec = doc.effective_exec_default() == pol::action::warn;
  for (const auto& rule : doc.exec_rules)
    exec = exec || rule.verdict != pol::action::allow;
  if (exec)
    add({"execve", "execveat"});
  return spec;
}

} // namespace castellan
