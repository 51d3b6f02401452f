#include "platform/linux/seccomp_filter.hpp"

#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <memory>
#include <tuple>
#include <utility>

#include "ipc/unique_fd.hpp"

namespace castellan::platform {

namespace {

/// Unconditional EPERM: ways out of (or around) the sandbox, and kernel
/// surfaces an interpreter never needs.
const std::vector<std::string> plain_denials = {
  // other processes' memory and descriptors
  "ptrace", "process_vm_readv", "process_vm_writev", "process_madvise", "pidfd_getfd", "kcmp",
  // the mount table (the root is built before the filter applies)
  "mount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsmount",
  "fsconfig", "fspick", "mount_setattr",
  // namespaces
  "unshare", "setns",
  // kernel attack surface: eBPF, perf, userfaultfd, keyrings, io_uring
  // (whose operations seccomp cannot see)
  "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key", "io_uring_setup",
  "io_uring_enter", "io_uring_register",
  // the machine itself
  "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
  "create_module", "get_kernel_syms", "query_module", "acct", "swapon", "swapoff", "reboot",
  "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "syslog", "quotactl",
  "quotactl_fd", "lookup_dcookie", "vhangup", "nfsservctl", "sethostname", "setdomainname",
  "fanotify_init", "uselib", "ustat", "sysfs", "_sysctl", "iopl", "ioperm", "modify_ldt",
  "vm86", "vm86old",
  // watching files: the binds of /usr and /etc are the host's inodes, which
  // other workers open too; a watch would show what they import
  "inotify_init", "inotify_init1", "inotify_add_watch", "fanotify_mark",
  // file handles bypass path-based checks (Landlock, mounts)
  "name_to_handle_at", "open_by_handle_at"};

/// The argument-filtered part, in words (for the report and the docs).
constexpr const char* argument_rules =
  "clone with any CLONE_NEW* flag: EPERM; clone3: ENOSYS (its flags are in memory the filter "
  "cannot read; libc falls back to clone); personality other than 0 (PER_LINUX) and "
  "0xffffffff (query): EPERM; ioctl TIOCSTI and TIOCLINUX: EPERM; prlimit64, "
  "sched_setaffinity, sched_setscheduler, sched_setparam, sched_setattr, setpriority and "
  "ioprio_set on pid 1, 2 or 3 (castellan-worker, the harness, the zygote), and setpriority "
  "and ioprio_set on a process group or a user: EPERM; fcntl F_NOTIFY: EPERM; fadvise64 "
  "POSIX_FADV_DONTNEED: 0 without effect; preadv2 and pwritev2 with RWF_NOWAIT: EOPNOTSUPP";

/// System calls that change a process's limits or scheduling, with the pid
/// as their first argument. Every process of the sandbox has the same uid,
/// which is all these calls check, and Landlock has no hook for them:
/// without a rule an exec could lower the limits, priority or CPUs of the
/// processes that serve the next one (inherited by every later fork of the
/// zygote) or of PID 1. Those have fixed pids in the sandbox's pid namespace
/// (serving_pids); the code's own processes and threads, by pid or by 0,
/// stay the code's to change.
constexpr const char* pid_first_calls[] = {"prlimit64", "sched_setaffinity",
                                           "sched_setscheduler", "sched_setparam",
                                           "sched_setattr"};
/// castellan-worker (the namespace's init), the harness, and in isolated
/// mode the zygote (test_escapes.sandbox_tests checks the layout: the exec's
/// process is pid 4, the zygote's child).
constexpr uint32_t serving_pids[] = {1, 2, 3};

constexpr uint64_t namespace_clone_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,
                                              CLONE_NEWNET,  CLONE_NEWIPC, CLONE_NEWUTS,
                                              CLONE_NEWCGROUP};

struct ctx_deleter {
  void operator()(void* ctx) const noexcept { seccomp_release(ctx); }
};
using ctx_ptr = std::unique_ptr<void, ctx_deleter>;

/// The highest syscall number libseccomp can name on this architecture.
int highest_known_syscall() {
  static const int highest = [] {
    int top = -1;
    for (int nr = 0; nr < 1024; ++nr) {
      if (char* name = seccomp_syscall_resolve_num_arch(SCMP_ARCH_NATIVE, nr)) {
        top = nr;
        std::free(name);
      }
    }
    return top;
  }();
  return highest;
}

enum class verdict : uint8_t { deny, kill };


failure scmp_failure(const std::string& what, int rc) { return errno_failure(what, -rc); }

} // namespace

const std::vector<std::string>& anti_escape_syscalls() {
  static const std::vector<std::string> all = [] {
    std::vector<std::string> v = plain_denials;
    v.insert(v.end(), {"clone", "clone3", "personality", "ioctl"});
    return v;
  }();
  return all;
}

outcome<std::vector<sock_filter>> export_bpf(void* ctx) {
  unique_fd fd(::memfd_create("castellan-seccomp-bpf", MFD_CLOEXEC));
  if (!fd)
    return errno_failure("seccomp: memfd_create for the exported program");
  if (int rc = seccomp_export_bpf(ctx, fd.get()))
    return errno_failure("seccomp: seccomp_export_bpf", -rc);
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  if (size <= 0 || size % static_cast<off_t>(sizeof(sock_filter)) != 0 ||
      size > static_cast<off_t>(BPF_MAXINSNS * sizeof(sock_filter)))
    return logic_failure("seccomp: libseccomp exported " + std::to_string(size) +
                         " bytes, not a program of 1.." + std::to_string(BPF_MAXINSNS) +
                         " instructions");
  std::vector<sock_filter> prog(static_cast<std::size_t>(size) / sizeof(sock_filter));
  std::size_t done = 0;
  auto* bytes = reinterpret_cast<char*>(prog.data());
  while (done < static_cast<std::size_t>(size)) {
    const ssize_t n = ::pread(fd.get(), bytes + done, static_cast<std::size_t>(size) - done,
                              static_cast<off_t>(done));
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return errno_failure("seccomp: reading the exported program", n == 0 ? EIO : errno);
    done += static_cast<std::size_t>(n);
  }
  return prog;
}

outcome<compiled_seccomp> compile_seccomp(const seccomp_spec& spec) {
  compiled_seccomp out;
  seccomp_report& report = out.report;
  if (!spec.enabled)
    return logic_failure("seccomp: compiling a disabled filter");
  if (spec.deny_errno <= 0 || spec.deny_errno > 4095)
    return logic_failure("seccomp: deny_errno " + std::to_string(spec.deny_errno) +
                         " is not an errno");

  // Resolve every name; the strongest verdict per syscall wins.
  std::map<int, std::pair<verdict, std::string>> rules;
  auto add = [&](const std::string& name, verdict v, bool from_policy) -> outcome<void> {
    const int nr = seccomp_syscall_resolve_name_arch(SCMP_ARCH_NATIVE, name.c_str());
    if (nr == __NR_SCMP_ERROR) {
      if (from_policy)
        return logic_failure("seccomp: '" + name + "' is not a system call libseccomp knows");
      report.not_on_this_arch.push_back(name);
      return {};
    }
    if (nr < 0) { // a pseudo number: a system call of other architectures only
      report.not_on_this_arch.push_back(name);
      return {};
    }
    auto [it, fresh] = rules.emplace(nr, std::make_pair(v, name));
    if (!fresh && v == verdict::kill)
      it->second.first = verdict::kill;
    return {};
  };
  for (const auto& n : plain_denials)
    if (auto r = add(n, verdict::deny, false); !r)
      return r.error();
  for (const auto& n : spec.deny)
    if (auto r = add(n, verdict::deny, true); !r)
      return r.error();
  for (const auto& n : spec.kill)
    if (auto r = add(n, verdict::kill, true); !r)
      return r.error();

  ctx_ptr ctx(seccomp_init(SCMP_ACT_ALLOW));
  if (!ctx)
    return logic_failure("seccomp: seccomp_init failed");
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS))
    return scmp_failure("seccomp: bad-architecture action", rc);
  if (int rc = seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_NNP, 1))
    return scmp_failure("seccomp: no_new_privs attribute", rc);
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_API_SYSRAWRC, 1);
  (void)seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);

  const uint32_t deny_action = SCMP_ACT_ERRNO(static_cast<uint16_t>(spec.deny_errno));
  const uint32_t eperm = SCMP_ACT_ERRNO(EPERM);
  for (const auto& [nr, rule] : rules) {
    const uint32_t action = rule.first == verdict::kill ? SCMP_ACT_KILL_PROCESS : deny_action;
    if (int rc = seccomp_rule_add(ctx.get(), action, nr, 0))
      return scmp_failure("seccomp: rule for " + rule.second, rc);
    (rule.first == verdict::kill ? report.killed : report.denied).push_back(rule.second);
  }
  auto unconditional = [&](const char* name) {
    return rules.count(seccomp_syscall_resolve_name(name)) != 0;
  };
  // clone: only the namespace-creating flags (fork and threads must work).
  if (!unconditional("clone")) {
    for (uint64_t flag : namespace_clone_flags) {
      if (int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(clone), 1,
                                    SCMP_A0_64(SCMP_CMP_MASKED_EQ, flag, flag)))
        return scmp_failure("seccomp: clone flag rule", rc);
    }
    report.denied.push_back("clone (CLONE_NEW*)");
  }
  if (!unconditional("clone3")) {
    if (int rc = seccomp_rule_add(ctx.get(), SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0))
      return scmp_failure("seccomp: clone3 rule", rc);
    report.denied.push_back("clone3 (ENOSYS)");
  }
  if (!unconditional("ioctl")) {
    for (unsigned long request : {static_cast<unsigned long>(TIOCSTI),
                                  static_cast<unsigned long>(TIOCLINUX)}) {
      // The request is an unsigned int to the kernel: its high 32 bits are
      // ignored there, so they are masked off here.
      if (int rc = seccomp_rule_add(ctx.get(), eperm, SCMP_SYS(ioctl), 1,
                                    scmp_arg_cmp{1, SCMP_CMP_MASKED_EQ, 0xffffffffull, request}))
        return scmp_failure("seccomp: ioctl rule", rc);
    }
    report.denied.push_back("ioctl (TIOCSTI, TIOCLINUX)");
  }
  // Limits and scheduling of the serving processes. The kernel reads these
  // arguments as 32-bit ints: a value with high bits set must match too, so
  // each rule compares the low 32 bits under a mask (libseccomp 2.5's _32
  // comparisons still look at all 64).
  auto argument_rule = [&](const char* name, uint32_t action, scmp_arg_cmp cmp,
                           const std::string& reported) -> outcome<void> {
    if (unconditional(name))
      return {};
    const int nr = seccomp_syscall_resolve_name(name);
    if (nr < 0)
      return {};
    if (int rc = seccomp_rule_add(ctx.get(), action, nr, 1, cmp))
      return scmp_failure(std::string("seccomp: ") + name + " rule", rc);
    if (std::find(report.denied.begin(), report.denied.end(), reported) == report.denied.end())
      report.denied.push_back(reported);
    return {};
  };
  auto low32_is = [](unsigned arg, uint32_t value) {
    return scmp_arg_cmp{arg, SCMP_CMP_MASKED_EQ, 0xffffffffull, value};
  };
  for (const char* name : pid_first_calls)
    for (uint32_t pid : serving_pids)
      if (auto r = argument_rule(name, eperm, low32_is(0, pid), std::string(name) + " (pids 1-3)");
          !r)
        return r.error();
  // setpriority(which, who, prio) and ioprio_set(which, who, ioprio): the
  // serving pids as `who`, and any process group (the worker's session
  // holds the serving processes) or user (every process of the sandbox).
  // (The other values of `which` the kernel refuses itself.)
  constexpr uint32_t ioprio_who_pgrp = 2, ioprio_who_user = 3;
  for (const auto& [name, group, user] :
       {std::tuple<const char*, uint32_t, uint32_t>{"setpriority", PRIO_PGRP, PRIO_USER},
        std::tuple<const char*, uint32_t, uint32_t>{"ioprio_set", ioprio_who_pgrp,
                                                    ioprio_who_user}}) {
    const std::string reported = std::string(name) + " (pids 1-3, groups, users)";
    for (uint32_t which : {group, user})
      if (auto r = argument_rule(name, eperm, low32_is(0, which), reported); !r)
        return r.error();
    for (uint32_t pid : serving_pids)
      if (auto r = argument_rule(name, eperm, low32_is(1, pid), reported); !r)
        return r.error();
  }
  // Watching files: dnotify is inotify's older door (fcntl F_NOTIFY).
  if (auto r = argument_rule("fcntl", eperm, low32_is(1, F_NOTIFY),
                             "fcntl (F_NOTIFY)");
      !r)
    return r.error();
  // The page cache of the host's files, which every worker shares: evicting
  // a page (fadvise DONTNEED) and asking whether one is cached without
  // reading it (RWF_NOWAIT) would show which files another worker reads.
  // DONTNEED is answered 0 and does nothing (it is advice).
  if (auto r = argument_rule("fadvise64", SCMP_ACT_ERRNO(0),
                             low32_is(3, POSIX_FADV_DONTNEED),
                             "fadvise64 (POSIX_FADV_DONTNEED: no effect)");
      !r)
    return r.error();
  for (const char* name : {"preadv2", "pwritev2"})
    if (auto r = argument_rule(name, SCMP_ACT_ERRNO(EOPNOTSUPP),
                               scmp_arg_cmp{5, SCMP_CMP_MASKED_EQ, RWF_NOWAIT, RWF_NOWAIT},
                               std::string(name) + " (RWF_NOWAIT)");
        !r)
      return r.error();
  report.arguments = argument_rules;

  // The second filter: numbers newer than libseccomp's table, x32, other ABIs.
  const int highest = highest_known_syscall();
  if (highest < 0)
    return logic_failure("seccomp: libseccomp names no system call of this architecture");
  const uint32_t native = seccomp_arch_native();
  const uint16_t ld = BPF_LD | BPF_W | BPF_ABS;
  const uint16_t jeq = BPF_JMP | BPF_JEQ | BPF_K;
  const uint16_t jge = BPF_JMP | BPF_JGE | BPF_K;
  const uint16_t jgt = BPF_JMP | BPF_JGT | BPF_K;
  const uint16_t ret = BPF_RET | BPF_K;
  const bool x86_64 = native == SCMP_ARCH_X86_64;
  std::vector<sock_filter> prog = {
    {ld, 0, 0, static_cast<uint32_t>(offsetof(seccomp_data, arch))},
    {jeq, 1, 0, native},
    {ret, 0, 0, SECCOMP_RET_KILL_PROCESS},
    {ld, 0, 0, static_cast<uint32_t>(offsetof(seccomp_data, nr))},
  };
  if (x86_64) {
    prog.push_back({jge, 0, 1, 0x40000000u}); // __X32_SYSCALL_BIT
    prog.push_back({ret, 0, 0, SECCOMP_RET_KILL_PROCESS});
  }
  // personality: the query (0xffffffff) and PER_LINUX (0) only; the other
  // personas (ADDR_NO_RANDOMIZE, READ_IMPLIES_EXEC…) weaken the process.
  // (libseccomp cannot express "neither a nor b" on one argument.)
  const bool personality_filtered = !unconditional("personality");
  if (personality_filtered) {
    // The low 32 bits of args[0] (persona is an unsigned int to glibc).
    const auto arg0_low = static_cast<uint32_t>(
      offsetof(seccomp_data, args[0]) + (__BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ ? 4 : 0));
    prog.push_back({jeq, 0, 5, static_cast<uint32_t>(SCMP_SYS(personality))});
    prog.push_back({ld, 0, 0, arg0_low});
    prog.push_back({jeq, 1, 0, 0u});
    prog.push_back({jeq, 0, 1, 0xffffffffu});
    prog.push_back({ret, 0, 0, SECCOMP_RET_ALLOW});
    prog.push_back({ret, 0, 0, SECCOMP_RET_ERRNO | EPERM});
  }
  prog.push_back({jgt, 0, 1, static_cast<uint32_t>(highest)});
  prog.push_back({ret, 0, 0, SECCOMP_RET_ERRNO | ENOSYS});
  prog.push_back({ret, 0, 0, SECCOMP_RET_ALLOW});
  out.guard = std::move(prog);

  auto rules_prog = export_bpf(ctx.get());
  if (!rules_prog)
    return rules_prog.error();
  out.rules = std::move(*rules_prog);
  if (personality_filtered)
    report.denied.push_back("personality (other than query and PER_LINUX)");
  report.mode = "filter";
  report.highest_allowed_nr = highest;
  return out;
}

outcome<seccomp_report> load_seccomp(const compiled_seccomp& filters) {
  for (const auto* prog : {&filters.rules, &filters.guard})
    if (prog->empty() || prog->size() > BPF_MAXINSNS)
      return logic_failure("seccomp: a compiled program of " + std::to_string(prog->size()) +
                           " instructions (1.." + std::to_string(BPF_MAXINSNS) + " expected)");
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
    return errno_failure("seccomp: prctl(PR_SET_NO_NEW_PRIVS)");
  // The policy's rules first, then the guard: a call passes both (the
  // kernel applies the most restrictive answer of every loaded filter).
  for (const auto* prog : {&filters.rules, &filters.guard}) {
    sock_fprog fprog{static_cast<unsigned short>(prog->size()),
                     const_cast<sock_filter*>(prog->data())};
    if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &fprog) != 0)
      return errno_failure(prog == &filters.rules ? "seccomp: loading the rules filter"
                                                  : "seccomp: loading the range/architecture filter");
  }
  seccomp_report report = filters.report;
  report.enforced = true;
  report.no_new_privs = ::prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) == 1;
  return report;
}

outcome<seccomp_report> apply_seccomp(const seccomp_spec& spec) {
  if (!spec.enabled)
    return seccomp_report{};
  if (spec.compiled)
    return load_seccomp(*spec.compiled);
  auto compiled = compile_seccomp(spec);
  if (!compiled)
    return compiled.error();
  return load_seccomp(*compiled);
}

} // namespace castellan::platform
