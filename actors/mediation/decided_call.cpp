#include "actors/mediation/decided_call.hpp"

#include <sys/syscall.h>
#include <time.h>

namespace castellan::mediation {

namespace {

int64_t now_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

} // namespace

const char* syscall_name(int nr) {
  switch (nr) {
#ifdef SYS_open
  case SYS_open:
    return "open";
#endif
#ifdef SYS_creat
  case SYS_creat:
    return "creat";
#endif
  case SYS_openat:
    return "openat";
  case SYS_openat2:
    return "openat2";
  case SYS_execve:
    return "execve";
  case SYS_execveat:
    return "execveat";
#ifdef SYS_unlink
  case SYS_unlink:
    return "unlink";
#endif
  case SYS_unlinkat:
    return "unlinkat";
#ifdef SYS_rmdir
  case SYS_rmdir:
    return "rmdir";
#endif
#ifdef SYS_mkdir
  case SYS_mkdir:
    return "mkdir";
#endif
  case SYS_mkdirat:
    return "mkdirat";
#ifdef SYS_mknod
  case SYS_mknod:
    return "mknod";
#endif
  case SYS_mknodat:
    return "mknodat";
#ifdef SYS_symlink
  case SYS_symlink:
    return "symlink";
#endif
  case SYS_symlinkat:
    return "symlinkat";
#ifdef SYS_link
  case SYS_link:
    return "link";
#endif
  case SYS_linkat:
    return "linkat";
#ifdef SYS_rename
  case SYS_rename:
    return "rename";
#endif
#ifdef SYS_renameat
  case SYS_renameat:
    return "renameat";
#endif
  case SYS_renameat2:
    return "renameat2";
  case SYS_truncate:
    return "truncate";
  case SYS_connect:
    return "connect";
  case SYS_bind:
    return "bind";
  case SYS_sendto:
    return "sendto";
  case SYS_sendmsg:
    return "sendmsg";
  case SYS_sendmmsg:
    return "sendmmsg";
  default:
    return "unknown";
  }
}

policy::decision rules_only(const policy::decision& d) {
  if (d.source == policy::decision_source::default_action && d.verdict == policy::action::deny)
    return policy::decision{policy::action::allow, policy::decision_source::default_action, -1,
                            d.pointer};
  return d;
}

policy_event make_event(event_kind kind, const char* syscall, std::string target,
                        policy::action verdict, std::string_view rule, pid_t pid) {
  policy_event e;
  e.kind = kind;
  e.syscall = syscall;
  e.target = std::move(target);
  e.decision = verdict == policy::action::deny   ? event_decision::deny
               : verdict == policy::action::warn ? event_decision::warn
                                                 : event_decision::allow;
  e.rule = std::string(rule);
  e.pid = pid;
  e.timestamp_ns = now_ns();
  return e;
}

} // namespace castellan::mediation
