#pragma once

/// @file syscall_mediator.hpp
/// Decides one seccomp notification of a sandboxed worker against the
/// pool's compiled policy, on the event source thread (no actor round trip).
/// CAF-free: it returns what happened and the event source turns that into
/// messages.
///
/// One file per family of calls, each deciding on what it copied out of
/// the caller once (never on memory the caller can still change):
///  - opens (open, openat, creat, openat2; mediated_opens.cpp): performed
///    by the supervisor from the worker's root and decided on the object
///    actually opened; reads are optimistic (a denial ends the worker),
///    writes, truncations and creations synchronous (EACCES);
///  - exec (execve, execveat; mediated_exec.cpp): decided on the copied
///    path, lexically and after resolution; allowed calls continue in the
///    kernel (see docs/security.md for why that is safe only with
///    Landlock's EXECUTE rights behind it);
///  - path calls (unlink, rmdir, mkdir, mknod, symlink, link, rename,
///    truncate and their *at forms; mediated_paths.cpp): each parent
///    directory resolved in the worker's root, decided on the resolved
///    location, performed by the supervisor on that directory fd, as the
///    worker;
///  - network calls (connect, bind, sendto, sendmsg, sendmmsg;
///    mediated_network.cpp): IPv4/IPv6 addresses against the net rules,
///    then answered "continue" for a stream socket (the sandbox's network
///    namespace and Landlock make a changed address harmless) and performed
///    by the supervisor for a datagram socket; pathname AF_UNIX addresses
///    against the fs rules, performed on a duplicate of the caller's socket.
/// Which calls reach the mediator at all: notify_mapping.hpp.

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/mediation/mediated_caller.hpp"
#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy_event.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/landlock.hpp"
#include "platform/linux/seccomp_notify.hpp"

namespace castellan {

struct mediated_address; ///< a socket address copied out of a caller (mediated_network.cpp)
struct mediated_message; ///< a message copied out of a caller (mediated_network.cpp)

/// One worker as the mediator sees it.
struct mediated_worker {
  uint64_t id = 0;
  int pidfd = -1;      ///< not owned (the pool's)
  int control_fd = -1; ///< not owned: denial details go here for the harness
  std::unique_ptr<platform::notify_listener> listener;
  unique_fd root;  ///< the sandbox's root directory, opened at the first notification
  uid_t fsuid = 0; ///< the worker's kernel uid/gid: DAC checks are made as it
  gid_t fsgid = 0;
  bool killed = false; ///< an optimistic check failed: ignore the rest
  /// The umask every process of the sandbox has, read at the first decided
  /// creation (-1: not yet). Valid until one of them calls umask(2), which
  /// the filter lists with the creations: from then on it is read from the
  /// caller at every creation.
  int umask = -1;
  bool umask_changed = false;
  /// The sandbox's network namespace, taken from a validated caller at
  /// the first socket the supervisor creates for it (every process of a
  /// sandbox shares it: setns and unshare are refused).
  unique_fd netns;
  /// Its user namespace, for a supervisor that can enter the network
  /// namespace only through it (an unprivileged one).
  unique_fd userns;
};

/// What the mediator knows of the sandbox besides the policy: enough to
/// answer as the static layers would where the policy leaves a call to them.
struct mediation_context {
  /// The egress relay's TCP port on 127.0.0.1 inside the sandbox (0: none).
  /// It is castellan's own way out, decided by the proxy: connecting to it
  /// is never decided here.
  uint16_t relay_port = 0;
  /// Whether the worker runs under Landlock, and its file-system rules.
  /// A call the supervisor performs for the worker is not subject to the
  /// worker's Landlock domain, so where only a `deny` default speaks
  /// against it, the mediator applies these rights itself.
  bool landlock = false;
  /// The file-system rights the worker's ruleset handles on this kernel:
  /// the others it has everywhere.
  uint64_t landlock_handled = 0;
  std::vector<platform::landlock_path_rule> landlock_paths;
};

/// The context for a pool's workers: the Landlock part of their sandbox
/// spec (null: they have no sandbox) and the relay port (0 without egress).
mediation_context make_mediation_context(const platform::landlock_spec* landlock,
                                         uint16_t relay_port);

/// What one notification came to.
struct mediation_result {
  enum class outcome : uint8_t { allow, deny, warn, kill, gone };
  outcome what = outcome::allow;
  int32_t errno_value = 0; ///< deny: what the caller got
  policy_event event;      ///< for deny, warn and kill
  uint64_t latency_ns = 0; ///< from receive to answer
};

class syscall_mediator {
public:
  explicit syscall_mediator(std::shared_ptr<const policy::compiled_policy> policy,
                            mediation_context context = {});

  /// Receives and decides one pending notification of `w`. Nothing when
  /// there was none (EAGAIN) or the caller went away before it was read.
  std::optional<mediation_result> handle(mediated_worker& w);

  /// Answers opens with their fd in one step (notify_listener::send_fd,
  /// one wake-up of the caller instead of two). Only for a thread nothing
  /// interrupts: the pool's event source blocks every signal and runs a ring
  /// that defers its task work. A one-step answer interrupted all the same
  /// leaves the caller with a wrong result: its worker is killed.
  void answer_fds_in_one_step(bool on) noexcept { one_step_fds_ = on; }

  /// Replaces the policy for the next decisions (called on the same thread).
  void set_policy(std::shared_ptr<const policy::compiled_policy> policy);
  const policy::compiled_policy& policy() const noexcept { return *policy_; }

  /// A decided rule as a pattern, for the checks a rename needs (what lies
  /// beneath a directory that moves).
  struct pattern_rule {
    std::vector<std::string> parts;
    policy::action verdict = policy::action::deny;
    std::string pointer;
  };

  /// How a change of the tree at one path is decided: a rule's deny or warn,
  /// or — when only a deny default speaks against it — the static layers'
  /// answer (`refuse`: Landlock's errno, no event).
  struct change_verdict {
    enum class kind : uint8_t { allow, warn, deny, refuse } what = kind::allow;
    policy::decision decision;
    std::string target;
    int refuse_errno = 0;
  };

  struct call; ///< one notification being decided (decided_call.hpp)

private:
  // mediated_opens.cpp
  struct open_request; ///< an open's arguments, copied once
  void decide_open(mediated_worker& w, call& c, mediation_result& r);
  /// Copies the arguments and the path of an open, made absolute; false
  /// when it answered (the call fails, or the caller is gone).
  bool copy_open_request(call& c, open_request& o);
  /// An O_CREAT open of a name that does not exist: decided on the
  /// resolved parent and the new name, created exclusively there. False
  /// when someone else created the name meanwhile (open it then); true
  /// when it answered.
  bool create_for_open(mediated_worker& w, call& c, const open_request& o);
  /// An open of the object resolved at `opath` (O_PATH): decided on its
  /// real path, reopened with the caller's flags and injected.
  void open_existing(mediated_worker& w, call& c, mediation_result& r, const open_request& o,
                     unique_fd opath);
  /// An optimistic read the policy denies: the worker is killed before the
  /// answer, unless the kernel refuses the read by itself.
  void end_for_denied_read(mediated_worker& w, call& c, mediation_result& r,
                           const open_request& o, int opath, const std::string& canon,
                           const policy::decision& d);
  /// The object `opath` names, opened with the caller's flags (as the
  /// worker, with the capabilities of its own /proc entry if it is in it);
  /// invalid with errno on failure.
  unique_fd reopen_for_caller(const open_request& o, int opath, bool fifo);
  /// Injects `fd` into the caller as its call's result (one step or two,
  /// answer_fds_in_one_step); false when the caller is gone.
  bool answer_with_fd(mediated_worker& w, const call& c, int fd, bool cloexec);
  // mediated_exec.cpp
  void decide_exec(mediated_worker& w, call& c, mediation_result& r);
  // mediated_paths.cpp
  void decide_remove(mediated_worker& w, call& c, mediation_result& r);
  void decide_create(mediated_worker& w, call& c, mediation_result& r);
  void decide_link(mediated_worker& w, call& c, mediation_result& r);
  void decide_rename(mediated_worker& w, call& c, mediation_result& r);
  void decide_truncate(mediated_worker& w, call& c, mediation_result& r);
  // mediated_network.cpp
  void decide_connect_or_bind(mediated_worker& w, call& c, mediation_result& r);
  void decide_send(mediated_worker& w, call& c, mediation_result& r);
  /// Decides an IPv4/IPv6 destination of a call on the caller's socket
  /// `sock`: false when it answered (a denial, or the kernel's error).
  /// Decides an IPv4/IPv6 address for the socket `sock` (answering a
  /// denial); `datagram`: the socket is SOCK_DGRAM, whose call the
  /// supervisor then performs itself with the decided address.
  bool admit_ip(call& c, int sock, const mediated_address& a, bool& datagram);
  /// connect or bind of a datagram socket, performed on a duplicate of it
  /// with the copied (decided) address, as the worker.
  void datagram_connect_or_bind(call& c, int sock, const mediated_address& a);
  /// A connect to AF_UNSPEC on an IP or AF_UNIX socket (it dissolves the
  /// association), made by this thread as copied.
  void datagram_disconnect(call& c, int sock, const mediated_address& a);
  void unix_bind(call& c, int sock, const std::string& path);
  void unix_connect(call& c, int sock, const std::string& path);
  /// Sends `m` to the pathname socket `path` on a duplicate of `sock`.
  /// The byte count or a negative errno; `answered` when it answered.
  int64_t unix_send(call& c, int sock, const std::string& path, const mediated_message& m,
                    int flags, bool& answered);

  /// Decides `perms` on `target` (each permission on its own): a rule's
  /// deny beats a warn; a deny that comes from the default is the static
  /// layers' job, answered here as Landlock would (see mediation_context).
  change_verdict check_change(const std::string& target, policy::fs_access perms) const;
  /// What moving the object at `from` to `to` would gain: a permission a
  /// rule denies (or warns about) at `from` but not at `to` (every decided
  /// permission for a directory, a file's own otherwise), and with
  /// `beneath`, a decided rule that reaches below `from` and not equally
  /// below `to`.
  change_verdict check_move(const std::string& from, const std::string& to, bool dir,
                            bool beneath) const;
  /// The Landlock rights the worker holds on `path` (all without Landlock).
  uint64_t landlock_rights(const std::string& path) const;

  /// Answers `err` with a syscall_denied event naming `target` and the rule.
  void deny(call& c, const std::string& target, const policy::decision& d, int err = EACCES);
  /// Answers a change the supervisor made for the caller: the errno it
  /// failed with (read here, so right after the call), or 0 and the warning
  /// its verdict carries.
  void performed(call& c, bool ok, const change_verdict& v);
  /// Records a policy_warning for a call that is answered as allowed.
  void warn(call& c, const std::string& target, const policy::decision& d);
  /// Answers a verdict that does not allow the call (deny: EACCES and an
  /// event; refuse: the static layers' errno). True when it answered.
  bool refused(call& c, const change_verdict& v);
  void send_denial_detail(const mediated_worker& w, const policy_event& e, int err) const;
  /// Sets this thread's fsuid/fsgid to the worker's; false if they are not.
  bool use_credentials_of(const mediated_worker& w);
  /// Whether this thread has no supplementary group (dropping any it has).
  bool without_groups();
  /// Gives this thread its own cwd and umask (unshare(CLONE_FS)) once, so
  /// that creations get the caller's umask and a bind can be made relative
  /// to a checked directory. False if the kernel refused.
  bool private_fs();
  /// Sets this thread's umask to the caller's (after private_fs()).
  void use_umask_of(mediated_worker& w, mediation::mediated_caller& who);
  /// Switches this thread's effective ids to the worker's for a socket
  /// operation whose peer sees the caller's credentials, and back.
  bool act_as_worker(const mediated_worker& w);
  void act_as_self(const mediated_worker& w);
  /// A socket created in the worker's network namespace (this thread
  /// enters it for the creation and comes back), as the worker's effective
  /// ids. The fd, or -1 with errno.
  int worker_socket(call& c, int domain, int type);

  std::shared_ptr<const policy::compiled_policy> policy_;
  mediation_context context_;
  policy::fs_access decided_fs_ = 0; ///< permissions some deny/warn rule decides
  bool decided_net_ = false;         ///< some net rule (or the default) needs deciding
  std::vector<pattern_rule> decided_rules_;
  uid_t current_fsuid_ = static_cast<uid_t>(-1);
  gid_t current_fsgid_ = static_cast<gid_t>(-1);
  int private_fs_ = 0; ///< 0 not tried, 1 done, -1 refused
  unique_fd own_netns_; ///< this thread's own network namespace, to come back to
  bool one_step_fds_ = false;
};

} // namespace castellan
