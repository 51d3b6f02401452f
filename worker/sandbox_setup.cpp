/// @file sandbox_setup.cpp
/// The worker-side sandbox pipeline (see sandbox_setup.hpp).

#include "worker/sandbox_setup.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "platform/linux/capabilities.hpp"
#include "platform/linux/enforcement_report.hpp"
#include "platform/linux/landlock.hpp"
#include "platform/linux/namespaces.hpp"
#include "platform/linux/seccomp_filter.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan::worker {

namespace {

int say(int code, const char* layer, const failure& f) noexcept {
  std::fprintf(stderr, "castellan-worker: sandbox %s: %s\n", layer, f.describe().c_str());
  std::fflush(stderr);
  return code;
}

/// vm.memfd_noexec of this process's pid namespace (the sysctl answers for
/// the reader's own), or -1 when the kernel has none (before 6.3).
int read_memfd_noexec() noexcept {
  const int fd = ::open("/proc/sys/vm/memfd_noexec", O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -1;
  char buf[8] = {};
  const ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n < 1 || buf[0] < '0' || buf[0] > '9')
    return -1;
  return buf[0] - '0';
}

} // namespace

const char* sandbox_exit_layer(int exit_code) noexcept {
  switch (exit_code) {
    case exit_sandbox_spec:
      return "the sandbox spec could not be read";
    case exit_sandbox_root:
      return "the root file system could not be built";
    case exit_sandbox_network:
      return "the loopback interface or the egress relay could not be set up";
    case exit_sandbox_capabilities:
      return "capabilities could not be dropped";
    case exit_sandbox_landlock:
      return "Landlock could not be applied";
    case exit_sandbox_seccomp:
      return "the seccomp filter could not be loaded";
    case exit_sandbox_notify:
      return "the seccomp notify filter could not be loaded or handed to the supervisor";
    case exit_sandbox_exec:
      return "executable memfds could not be refused (vm.memfd_noexec)";
    default:
      return nullptr;
  }
}

std::optional<sandbox_setup> sandbox_setup::enter(int spec_fd, sandbox_failure& failed) {
  auto out = read(spec_fd, failed);
  if (!out || !out->build(failed))
    return std::nullopt;
  return out;
}

std::optional<sandbox_setup> sandbox_setup::read(int spec_fd, sandbox_failure& failed) {
  auto spec = platform::read_sandbox_spec(spec_fd);
  ::close(spec_fd);
  if (!spec) {
    failed = {exit_sandbox_spec, spec.error()};
    return std::nullopt;
  }
  sandbox_setup out;
  out.spec_ = std::move(*spec);
  return out;
}

bool sandbox_setup::build(sandbox_failure& failed) {
  using namespace platform;
  // Read here: the sandbox's own /proc (subset=pid) has no /proc/sys.
  const int memfd_noexec = read_memfd_noexec();
  if (spec_.memfd_noexec.required && memfd_noexec != 2 && !spec_.memfd_noexec.best_effort) {
    failed = {exit_sandbox_exec,
              logic_failure(memfd_noexec < 0
                              ? std::string("this kernel has no vm.memfd_noexec (6.3+)")
                              : "vm.memfd_noexec is " + std::to_string(memfd_noexec) +
                                  " in the sandbox's pid namespace, not 2 (only a supervisor "
                                  "running as root can set it) and the policy does not allow "
                                  "best effort")};
    return false;
  }
  // Here, while /proc is still the supervisor's (the sandbox's own has no
  // /proc/sys): the file names this process's network namespace.
  if (auto r = close_landlock_tcp_bypasses(); !r) {
    failed = {exit_sandbox_network, r.error()};
    return false;
  }
  auto root = build_root(spec_.root);
  if (!root) {
    failed = {exit_sandbox_root, root.error()};
    return false;
  }
  root_ = std::move(*root);
  root_.memfd_noexec = memfd_noexec;
  if (spec_.loopback_up) {
    if (auto r = set_loopback_up(); !r) {
      failed = {exit_sandbox_network, r.error()};
      return false;
    }
  }
  if (spec_.egress_port != 0) {
    // Bound before the interpreter runs anything of its own: nothing in the
    // sandbox can take the port first.
    auto relay = egress_relay::open(spec_.egress_port, spec_.egress_fd);
    if (!relay) {
      failed = {exit_sandbox_network, relay.error()};
      return false;
    }
    relay_.emplace(std::move(*relay));
  }
  if (spec_.drop_capabilities) {
    // PID 1 keeps running next to hostile code: it needs no capability to
    // reap and forward signals, and nobody may ptrace or read it.
    auto caps = drop_capabilities();
    if (!caps) {
      failed = {exit_sandbox_capabilities, caps.error()};
      return false;
    }
    capabilities_ = *caps;
    if (::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
      failed = {exit_sandbox_capabilities, errno_failure("prctl(PR_SET_DUMPABLE, 0)")};
      return false;
    }
  }
  return true;
}

int sandbox_setup::apply_in_early_child(int control_fd, platform::root_report root) noexcept {
  using namespace platform;
  root_ = std::move(root);
  if (spec_.drop_capabilities) {
    auto caps = drop_capabilities();
    if (!caps)
      return say(exit_sandbox_capabilities, "capabilities", caps.error());
    capabilities_ = *caps;
  }
  // build_root left PID 1 in the working directory; pivot_root moved this
  // process only to the new root.
  if (!spec_.root.workdir.empty() && ::chdir(spec_.root.workdir.c_str()) != 0)
    return say(exit_sandbox_root, "root", errno_failure("chdir " + spec_.root.workdir));
  return apply_in_child(control_fd);
}

int sandbox_setup::apply_in_child(int control_fd) noexcept {
  using namespace platform;
  // PID 1 is single-threaded: this child may allocate.
  enforcement_report report;
  report.root = root_;
  if (spec_.drop_capabilities) {
    // Dropped and verified empty and locked (no exec, no set*id can bring
    // a capability back): by PID 1 before the fork, whose credentials this
    // process has, or by this process itself (apply_in_early_child).
    report.capabilities = capabilities_;
  }
  report.landlock_requested = spec_.landlock.enabled;
  if (spec_.landlock.enabled) {
    auto ll = apply_landlock(spec_.landlock);
    if (!ll)
      return say(exit_sandbox_landlock, "landlock", ll.error());
    if (!ll->enforced && !spec_.landlock.best_effort)
      return say(exit_sandbox_landlock, "landlock",
                 logic_failure("not enforced by this kernel (ABI " + std::to_string(ll->abi) +
                               ") and the policy does not allow best effort"));
    report.landlock = *ll;
  }
  report.seccomp_requested = spec_.seccomp.enabled;
  if (spec_.seccomp.enabled) {
    auto sc = apply_seccomp(spec_.seccomp);
    if (!sc)
      return say(exit_sandbox_seccomp, "seccomp", sc.error());
    report.seccomp = *sc;
  }
  if (!spec_.notify.empty()) {
    // Last: every earlier step's calls are done, and from here on the
    // listed calls wait for the supervisor.
    if (control_fd < 0)
      return say(exit_sandbox_notify, "notify",
                 logic_failure("the spec asks for a notify filter but there is no --control-fd"));
    auto listener = install_notify_filter(spec_.notify);
    if (!listener)
      return say(exit_sandbox_notify, "notify", listener.error());
    // Not by SCM_RIGHTS: sendmsg may be a decided call already, which
    // nobody could answer (seccomp_notify.hpp, "handing the listener over").
    if (auto sent = hand_over_listener(control_fd, listener->get()); !sent)
      return say(exit_sandbox_notify, "notify", sent.error());
    // The worker has nothing more to say on the control socket: shut its
    // sending side, for good, so that no exec can park descriptors or data
    // in the supervisor's end (which nobody reads any more).
    if (::shutdown(control_fd, SHUT_WR) != 0)
      return say(exit_sandbox_notify, "notify", errno_failure("shutdown of the control socket"));
    // The child must not keep a listener of its own filter: it would answer
    // itself.
    listener->reset();
  }
  const std::string json = report.to_json();
  if (::setenv("CASTELLAN_ENFORCEMENT", json.c_str(), 1) != 0)
    return say(exit_sandbox_spec, "report", errno_failure("setenv CASTELLAN_ENFORCEMENT"));
  return 0;
}

} // namespace castellan::worker
