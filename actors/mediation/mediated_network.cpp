/// @file mediated_network.cpp
/// The calls that name a network destination or a local address: connect,
/// bind, sendto (with an address), sendmsg and sendmmsg (with msg_name),
/// decided by syscall_mediator.
///
/// The address is copied out of the caller once and decided:
///   - AF_INET/AF_INET6 with mediated_net_decision (network_layers.hpp,
///     which `policy explain` uses too): the net rules, tcp for a stream
///     socket, udp otherwise; a bind is decided as its local endpoint; on
///     the sandbox's own addresses the default counts too. An allowed call
///     of a stream socket continues in the kernel, which reads the address
///     again. That is harmless, and written down as such in
///     docs/security.md: the sandbox's network namespace has nothing but
///     loopback, and Landlock lets TCP connect only to the egress relay's
///     port and bind nowhere, so whatever address the kernel finally uses
///     reaches only the relay, whose destinations the proxy decides, or
///     nothing. A datagram socket has no such layer on loopback: its
///     connect, bind and sends are performed here, on a duplicate of the
///     caller's socket with the copied address (a bind below port 1024 is
///     refused as the kernel would refuse the code), so the address the
///     kernel uses is the one decided.
///   - AF_UNIX with a path against the fs rules: a pathname socket is a
///     file. bind creates it (make_sock), connect and send write to it
///     (write_file, the kernel's own permission check). The supervisor
///     performs these itself, on a duplicate of the caller's socket
///     (pidfd_getfd) and with the checked object: the socket file held open
///     O_PATH and named through /proc/self/fd, or, for bind, the checked
///     directory as this thread's cwd. A peer sees the worker's uid and gid
///     (the thread's effective ids are switched for the call). Nothing here
///     ever waits for a peer: a stream connect goes through a fresh
///     non-blocking socket put in place of the caller's, sends carry
///     MSG_DONTWAIT.
///   - abstract and unnamed AF_UNIX addresses and other families continue:
///     Landlock's IPC scoping keeps abstract sockets inside the sandbox, the
///     anti-escape filter and the namespaces bound the rest.

#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <signal.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include <spdlog/spdlog.h>

#include "actors/mediation/mediation_privileges.hpp"
#include "actors/mediation/decided_call.hpp"
#include "actors/mediation/paths_in_root.hpp"
#include "actors/mediation/network_layers.hpp"

namespace castellan {

namespace {

namespace pol = policy;
using namespace mediation;

/// At most this many messages of one sendmmsg are looked at (the kernel's
/// own bound, UIO_MAXIOV).
constexpr uint64_t max_mmsg = 1024;
/// Control data copied from a caller's sendmsg.
constexpr std::size_t max_control = 64 * 1024;
/// At most this many iovecs (the kernel's UIO_MAXIOV).
constexpr uint64_t max_iov = 1024;
/// At most this many descriptors in one message (the kernel's SCM_MAX_FD).
constexpr std::size_t max_passed_fds = 253;
/// The shortest sockaddr_in6 the kernel accepts (RFC 2133's, without
/// sin6_scope_id).
constexpr socklen_t min_in6_length = 24;

int socket_type(int sock) {
  int type = 0;
  socklen_t len = sizeof type;
  if (::getsockopt(sock, SOL_SOCKET, SO_TYPE, &type, &len) != 0)
    return -errno;
  return type;
}

/// The address family the socket itself was made for (SO_DOMAIN), or
/// -errno. What a call does is the socket's domain's business: a caller
/// names any family it likes in the address it passes (AF_UNSPEC is taken
/// as AF_INET by an IPv4 socket's bind and sendmsg), and can change it
/// after it was copied.
int socket_domain(int sock) {
  int domain = 0;
  socklen_t len = sizeof domain;
  if (::getsockopt(sock, SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0)
    return -errno;
  return domain;
}

bool is_ip_domain(int domain) { return domain == AF_INET || domain == AF_INET6; }

/// Whether the caller's fd `fd` is close-on-exec (its fdinfo).
bool caller_cloexec(mediated_caller& who, int fd) {
  char buf[512];
  if (who.read_small("fdinfo/" + std::to_string(fd), buf, sizeof buf) <= 0)
    return true;
  const char* flags = std::strstr(buf, "flags:");
  return flags == nullptr || (std::strtoul(flags + 6, nullptr, 8) & O_CLOEXEC) != 0;
}

/// A socket made by a child that enters the user namespace `userns` and the
/// network namespace `netns`, empties all its capability sets and creates
/// it, then hands it over (SCM_RIGHTS). For a supervisor that cannot enter
/// `netns` itself. The fd, or -1 with errno.
int socket_in_namespaces(int userns, int netns, int domain, int type) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
    return -1;
  unique_fd mine(sv[0]);
  unique_fd theirs(sv[1]);
  // A raw clone: the child of a multithreaded process runs system calls
  // only (no allocation, no lock, no atfork handler) and _exits.
  const long pid = ::syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
  if (pid < 0)
    return -1;
  if (pid == 0) {
    int result = 0;
    if (::syscall(SYS_setns, userns, CLONE_NEWUSER) != 0 ||
        ::syscall(SYS_setns, netns, CLONE_NEWNET) != 0) {
      result = errno;
    } else {
      // Entering the user namespace gave it every capability there: none
      // may stay on the socket's credentials.
      __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
      __user_cap_data_struct data[2] = {};
      const int s = ::syscall(SYS_capset, &header, data) != 0 ? -1 : ::socket(domain, type, 0);
      if (s < 0) {
        result = errno;
      } else {
        char control[CMSG_SPACE(sizeof(int))] = {};
        iovec iov{&result, sizeof result};
        msghdr h{};
        h.msg_iov = &iov;
        h.msg_iovlen = 1;
        h.msg_control = control;
        h.msg_controllen = sizeof control;
        cmsghdr* cm = CMSG_FIRSTHDR(&h);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        std::memcpy(CMSG_DATA(cm), &s, sizeof s);
        (void)::sendmsg(sv[1], &h, MSG_NOSIGNAL);
        ::_exit(0);
      }
    }
    (void)::send(sv[1], &result, sizeof result, MSG_NOSIGNAL);
    ::_exit(0);
  }
  theirs.reset();
  int result = EIO;
  char control[CMSG_SPACE(sizeof(int))] = {};
  iovec iov{&result, sizeof result};
  msghdr h{};
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  h.msg_control = control;
  h.msg_controllen = sizeof control;
  const ssize_t n = ::recvmsg(mine.get(), &h, MSG_CMSG_CLOEXEC);
  int fd = -1;
  const cmsghdr* cm = n > 0 ? CMSG_FIRSTHDR(&h) : nullptr;
  if (cm != nullptr && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
    std::memcpy(&fd, CMSG_DATA(cm), sizeof fd);
  (void)::waitpid(static_cast<pid_t>(pid), nullptr, __WALL);
  if (fd < 0) {
    errno = n == static_cast<ssize_t>(sizeof result) && result != 0 ? result : EIO;
    return -1;
  }
  return fd;
}

/// "tcp 203.0.113.5:80", "udp [2001:db8::1]:53".
std::string describe(pol::net_proto proto, const pol::ip_address& ip, uint16_t port) {
  std::string s(pol::to_string(proto));
  s += ' ';
  if (ip.family == pol::ip_family::v6)
    s += "[" + pol::to_string(ip) + "]";
  else
    s += pol::to_string(ip);
  return s + ":" + std::to_string(port);
}

/// Our name for the object behind our fd `fd`, as an AF_UNIX address.
socklen_t magic_address(int fd, sockaddr_un& out) {
  out = sockaddr_un{};
  out.sun_family = AF_UNIX;
  const int n = std::snprintf(out.sun_path, sizeof out.sun_path, "/proc/self/fd/%d", fd);
  return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + static_cast<std::size_t>(n) + 1);
}

} // namespace

/// A socket address copied out of the caller.
struct mediated_address {
  sockaddr_storage storage{};
  socklen_t length = 0;

  sa_family_t family() const noexcept {
    return length >= sizeof(sa_family_t) ? storage.ss_family : AF_UNSPEC;
  }
  /// The path of a pathname AF_UNIX address; empty for an unnamed or
  /// abstract one (or another family).
  std::string unix_path() const {
    if (family() != AF_UNIX || length <= offsetof(sockaddr_un, sun_path))
      return {};
    const auto* un = reinterpret_cast<const sockaddr_un*>(&storage);
    const std::size_t max = length - offsetof(sockaddr_un, sun_path);
    if (un->sun_path[0] == '\0')
      return {}; // abstract
    return std::string(un->sun_path, strnlen(un->sun_path, max));
  }
};

/// A message to send, copied out of the caller: the payload gathered into
/// one buffer, SCM_RIGHTS turned into our own duplicates.
struct mediated_message {
  std::vector<char> data;
  std::vector<unique_fd> fds;
  /// Control data at the IP, IPv6 and UDP levels (IP_PKTINFO, IP_TOS,
  /// UDP_SEGMENT, …), passed on as it was: plain values the kernel reads
  /// for the caller's own socket.
  std::vector<char> ip_control;
};

namespace {

/// Copies an address of `len` bytes at `addr`. 0, or an errno to answer;
/// `out.length` 0 when the length can name no family.
int copy_address(mediated_caller& who, uint64_t addr, uint64_t len, mediated_address& out) {
  if (static_cast<int64_t>(static_cast<int32_t>(len)) < 0 || len > sizeof out.storage)
    return EINVAL;
  out.length = static_cast<socklen_t>(len);
  if (out.length < sizeof(sa_family_t) || addr == 0) {
    out.length = 0;
    return 0;
  }
  if (auto ok = who.read(addr, &out.storage, out.length); !ok)
    return ok.error().code == ESRCH ? ESRCH : EFAULT;
  return 0;
}

/// The cap on a payload copied for an emulated send: the kernel refuses a
/// datagram larger than the socket's send buffer anyway.
std::size_t send_cap(mediated_caller& who, int sock) {
  unique_fd dup;
  int size = 0;
  socklen_t len = sizeof size;
  if (who.dup_fd(sock, dup) != 0 ||
      ::getsockopt(dup.get(), SOL_SOCKET, SO_SNDBUF, &size, &len) != 0 || size <= 0)
    return 256 * 1024;
  return std::min<std::size_t>(static_cast<std::size_t>(size), 16u << 20);
}

/// Copies the iovecs of a caller's msghdr (they are in the caller's
/// memory). 0 or an errno.
int read_iovs(mediated_caller& who, const msghdr& h, std::vector<iovec>& iov) {
  if (h.msg_iovlen > max_iov)
    return EMSGSIZE;
  iov.resize(h.msg_iovlen);
  if (!iov.empty() &&
      !who.read(reinterpret_cast<uint64_t>(h.msg_iov), iov.data(), iov.size() * sizeof(iovec)))
    return EFAULT;
  return 0;
}

/// Copies the payload the iovecs point to (caller addresses) and the
/// descriptors of the control data. 0 or an errno.
int copy_message(mediated_caller& who, int sock, const std::vector<iovec>& iov,
                 uint64_t control_addr, std::size_t control_len, mediated_message& m) {
  const std::size_t cap = send_cap(who, sock);
  std::size_t total = 0;
  for (const auto& v : iov) {
    if (v.iov_len > cap || total + v.iov_len > cap)
      return EMSGSIZE;
    total += v.iov_len;
  }
  m.data.resize(total);
  std::size_t at = 0;
  for (const auto& v : iov) {
    if (v.iov_len != 0 &&
        !who.read(reinterpret_cast<uint64_t>(v.iov_base), m.data.data() + at, v.iov_len))
      return EFAULT;
    at += v.iov_len;
  }
  if (control_len == 0)
    return 0;
  if (control_len > max_control)
    return ENOBUFS;
  std::vector<char> control(control_len);
  if (!who.read(control_addr, control.data(), control.size()))
    return EFAULT;
  msghdr local{};
  local.msg_control = control.data();
  local.msg_controllen = control.size();
  for (cmsghdr* cm = CMSG_FIRSTHDR(&local); cm != nullptr; cm = CMSG_NXTHDR(&local, cm)) {
    if (cm->cmsg_len < CMSG_LEN(0) ||
        cm->cmsg_len >
            control.size() - static_cast<std::size_t>(reinterpret_cast<char*>(cm) - control.data()))
      return EINVAL;
    // Descriptors are carried over (as our duplicates of the caller's),
    // and the IP-level values of a datagram; credentials would be
    // checked against this thread's identity, not the caller's, so they
    // are refused.
    if (cm->cmsg_level == IPPROTO_IP || cm->cmsg_level == IPPROTO_IPV6 ||
        cm->cmsg_level == IPPROTO_UDP) {
      // Copied with its padding (zeros where the caller's buffer ends).
      const auto* header = reinterpret_cast<const char*>(cm);
      const std::size_t left = control.size() - static_cast<std::size_t>(header - control.data());
      const std::size_t space = CMSG_SPACE(cm->cmsg_len - CMSG_LEN(0));
      const std::size_t start = m.ip_control.size();
      m.ip_control.resize(start + space, '\0');
      std::memcpy(m.ip_control.data() + start, header, std::min(space, left));
      continue;
    }
    if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
      return EOPNOTSUPP;
    const std::size_t count = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    // The kernel's own bound (SCM_MAX_FD): each one costs a descriptor of
    // the supervisor's until the send is done.
    if (m.fds.size() + count > max_passed_fds)
      return EINVAL;
    for (std::size_t i = 0; i < count; ++i) {
      int fd = -1;
      std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof fd);
      unique_fd dup;
      if (who.dup_fd(fd, dup) != 0)
        return EBADF;
      m.fds.push_back(std::move(dup));
    }
  }
  return 0;
}

} // namespace

bool syscall_mediator::admit_ip(call& c, int sock, const mediated_address& a, bool& datagram) {
  datagram = false;
  pol::ip_address ip;
  uint16_t port = 0;
  if (a.family() == AF_INET) {
    if (a.length < sizeof(sockaddr_in))
      return true; // the kernel refuses it (EINVAL) whatever it reads
    const auto* in = reinterpret_cast<const sockaddr_in*>(&a.storage);
    ip.family = pol::ip_family::v4;
    std::memcpy(ip.bytes.data(), &in->sin_addr, 4);
    port = ntohs(in->sin_port);
  } else {
    if (a.length < min_in6_length)
      return true;
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&a.storage);
    port = ntohs(in6->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
      ip.family = pol::ip_family::v4;
      std::memcpy(ip.bytes.data(), &in6->sin6_addr.s6_addr[12], 4);
    } else {
      ip.family = pol::ip_family::v6;
      std::memcpy(ip.bytes.data(), &in6->sin6_addr, 16);
    }
  }
  // The protocol is the socket's: stream is tcp, anything else udp.
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0) {
    c.fail(err);
    return false;
  }
  const int type = socket_type(dup.get());
  if (type < 0) {
    c.fail(-type);
    return false;
  }
  datagram = type == SOCK_DGRAM;
  const pol::net_proto proto = type == SOCK_STREAM ? pol::net_proto::tcp : pol::net_proto::udp;
  // The egress relay is castellan's own: the proxy decides where it leads.
  static const pol::ip_address loopback = pol::make_ipv4(0x7f000001);
  if (proto == pol::net_proto::tcp && c.n.nr == SYS_connect && context_.relay_port != 0 &&
      port == context_.relay_port && ip == loopback)
    return true;
  // mediated_net_decision is also what `policy explain` reports.
  const pol::decision d = mediated_net_decision(*policy_, proto, ip, port);
  if (d.verdict == pol::action::deny) {
    deny(c, describe(proto, ip, port), d);
    return false;
  }
  if (d.verdict == pol::action::warn)
    warn(c, describe(proto, ip, port), d);
  return true;
}

void syscall_mediator::datagram_connect_or_bind(call& c, int sock, const mediated_address& a) {
  const bool bind = c.n.nr == SYS_bind;
  uint16_t port = 0;
  if (a.family() == AF_INET)
    port = ntohs(reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_port);
  else
    port = ntohs(reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_port);
  // Sandboxed code has no CAP_NET_BIND_SERVICE; this thread might have it
  // over the worker's network namespace (an unprivileged supervisor owns
  // the worker's user namespace), so the kernel's check is made here.
  if (bind && port != 0 && port < 1024)
    return c.fail(EACCES);
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0)
    return c.fail(err);
  // The fd number may name another socket by now (one of the caller's
  // threads can dup2 over it): only a datagram socket is acted on here. A
  // stream socket's connect or bind made by this thread would be out of the
  // worker's Landlock domain.
  if (socket_type(dup.get()) != SOCK_DGRAM || !is_ip_domain(socket_domain(dup.get())))
    return c.fail(EINVAL);
  if (!act_as_worker(*c.w))
    return c.fail(EACCES);
  const auto* sa = reinterpret_cast<const sockaddr*>(&a.storage);
  const int rc = bind ? ::bind(dup.get(), sa, a.length) : ::connect(dup.get(), sa, a.length);
  const int err = errno;
  act_as_self(*c.w);
  if (rc != 0)
    return c.fail(err);
  c.succeed(0);
}

void syscall_mediator::datagram_disconnect(call& c, int sock, const mediated_address& a) {
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0)
    return c.fail(err);
  const int domain = socket_domain(dup.get());
  if (!is_ip_domain(domain) && domain != AF_UNIX)
    return c.fail(EINVAL);
  if (!act_as_worker(*c.w))
    return c.fail(EACCES);
  const int rc = ::connect(dup.get(), reinterpret_cast<const sockaddr*>(&a.storage), a.length);
  const int err = errno;
  act_as_self(*c.w);
  if (rc != 0)
    return c.fail(err);
  c.succeed(0);
}

void syscall_mediator::decide_connect_or_bind(mediated_worker&, call& c, mediation_result& r) {
  const auto& n = c.n;
  const bool bind = n.nr == SYS_bind;
  const int sock = static_cast<int>(n.args[0]);
  mediated_address a;
  if (int err = copy_address(c.caller, n.args[1], n.args[2], a); err != 0)
    return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  auto carry_on = [&] {
    if (!c.listener().respond_continue(n.id))
      return c.gone();
    if (r.what != mediation_result::outcome::warn)
      r.what = mediation_result::outcome::allow;
  };
  // The socket's own domain decides (socket_domain).
  int domain = AF_UNSPEC;
  {
    unique_fd dup;
    if (int err = c.caller.dup_fd(sock, dup); err != 0)
      return c.fail(err);
    domain = socket_domain(dup.get());
    if (domain < 0)
      return c.fail(-domain);
  }
  if (decided_net_ && is_ip_domain(domain) && a.family() != AF_INET && a.family() != AF_INET6) {
    // Only a connect to AF_UNSPEC (which dissolves an association) names
    // no endpoint; it is made here, as copied. Anything else the kernel
    // would read again: an AF_UNSPEC bind is an IPv4 bind to it.
    if (bind || a.family() != AF_UNSPEC)
      return c.fail(EAFNOSUPPORT);
    return datagram_disconnect(c, sock, a);
  }
  if (domain == AF_UNIX && a.family() != AF_UNIX && (decided_fs_ != 0 || decided_net_)) {
    if (!bind && a.family() == AF_UNSPEC)
      return datagram_disconnect(c, sock, a);
    return c.fail(EINVAL); // what the kernel answers; never read again
  }
  switch (a.family()) {
  case AF_INET:
  case AF_INET6: {
    if (!decided_net_)
      return carry_on();
    bool datagram = false;
    if (!admit_ip(c, sock, a, datagram))
      return;
    // A datagram socket's address is used as it was decided (see the file
    // comment); a stream socket's is left to Landlock and the namespace.
    if (datagram) {
      datagram_connect_or_bind(c, sock, a);
      if (r.what != mediation_result::outcome::warn)
        r.what = mediation_result::outcome::allow;
      return;
    }
    return carry_on();
  }
  case AF_UNIX: {
    const std::string path = a.unix_path();
    const pol::fs_access needs =
        pol::to_access(bind ? pol::fs_perm::make_sock : pol::fs_perm::write_file);
    if (path.empty() || (decided_fs_ & needs) == 0)
      return carry_on();
    return bind ? unix_bind(c, sock, path) : unix_connect(c, sock, path);
  }
  default:
    return carry_on();
  }
}

void syscall_mediator::unix_bind(call& c, int sock, const std::string& path) {
  located_name at;
  if (int err = locate_new(c.w->root.get(), c.caller, AT_FDCWD, path, EADDRINUSE, false, at);
      err != 0)
    return c.fail(err);
  if (on_read_only_mount(at.parent.get()))
    return c.fail(EROFS);
  const auto v = check_change(at.path, pol::to_access(pol::fs_perm::make_sock));
  if (refused(c, v))
    return;
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0)
    return c.fail(err);
  if (!private_fs())
    return c.fail(ENOMEM);
  // The socket file is created by name in this thread's cwd: the checked
  // directory. The caller's getsockname() then shows that name without
  // its directory (see docs/security.md).
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  std::memcpy(un.sun_path, at.name.data(), at.name.size());
  const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + at.name.size() + 1);
  use_umask_of(*c.w, c.caller);
  int err = 0;
  if (::fchdir(at.parent.get()) != 0) {
    err = errno;
  } else {
    if (::bind(dup.get(), reinterpret_cast<const sockaddr*>(&un), len) != 0)
      err = errno;
    // Never keep a worker's directory (and its mount) as our cwd.
    (void)::chdir("/");
  }
  if (err != 0)
    return c.fail(err);
  c.succeed(0);
  if (v.what == change_verdict::kind::warn)
    warn(c, v.target, v.decision);
}

void syscall_mediator::unix_connect(call& c, int sock, const std::string& path) {
  const auto& n = c.n;
  auto& w = *c.w;
  std::string abs;
  if (int err = absolute(c.caller, AT_FDCWD, path, abs); err != 0)
    return c.fail(err);
  // The socket file itself (symlinks followed inside the root), held open:
  // what is connected to is what is decided.
  unique_fd object(open_in_root(w.root.get(), abs, O_PATH | O_CLOEXEC));
  if (!object)
    return c.fail(errno);
  struct stat st;
  if (::fstat(object.get(), &st) != 0)
    return c.fail(errno);
  if (!S_ISSOCK(st.st_mode))
    return c.fail(ECONNREFUSED);
  std::string canon;
  if (int err = fd_path(object.get(), canon); err != 0)
    return c.fail(err);
  const pol::decision d =
      rules_only(policy_->check_fs(canon, pol::to_access(pol::fs_perm::write_file)));
  if (d.verdict == pol::action::deny)
    return deny(c, canon, d);
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0)
    return c.fail(err);
  const int type = socket_type(dup.get());
  if (type < 0)
    return c.fail(-type);
  sockaddr_un target;
  const socklen_t target_len = magic_address(object.get(), target);
  const auto* target_sa = reinterpret_cast<const sockaddr*>(&target);
  int err = 0;
  if (type == SOCK_DGRAM) {
    // A datagram connect only records the peer: never waits.
    if (!act_as_worker(w))
      return c.fail(EACCES);
    if (::connect(dup.get(), target_sa, target_len) != 0)
      err = errno;
    act_as_self(*c.w);
    if (err != 0)
      return c.fail(err);
    c.succeed(0);
  } else {
    // A stream connect may wait for the listener's backlog. The caller's
    // socket could be made blocking again by another of its threads at
    // any moment, so the connect is made on a fresh non-blocking socket,
    // which then takes the place of the caller's fd.
    sockaddr_storage name{};
    socklen_t name_len = sizeof name;
    int accepting = 0;
    socklen_t accepting_len = sizeof accepting;
    if (::getpeername(dup.get(), reinterpret_cast<sockaddr*>(&name), &name_len) == 0)
      return c.fail(EISCONN);
    if (::getsockopt(dup.get(), SOL_SOCKET, SO_ACCEPTCONN, &accepting, &accepting_len) == 0 &&
        accepting != 0)
      return c.fail(EINVAL);
    name_len = sizeof name;
    if (::getsockname(dup.get(), reinterpret_cast<sockaddr*>(&name), &name_len) != 0)
      return c.fail(errno);
    if (name.ss_family != AF_UNIX)
      return c.fail(EAFNOSUPPORT);
    if (name_len > sizeof(sa_family_t))
      return c.fail(EOPNOTSUPP); // a bound client: its name cannot move to another socket
    int passcred = 0;
    socklen_t opt_len = sizeof passcred;
    (void)::getsockopt(dup.get(), SOL_SOCKET, SO_PASSCRED, &passcred, &opt_len);
    const int fl = ::fcntl(dup.get(), F_GETFL);
    if (!act_as_worker(w))
      return c.fail(EACCES);
    unique_fd fresh(worker_socket(c, AF_UNIX, type | SOCK_NONBLOCK | SOCK_CLOEXEC));
    if (!fresh) {
      err = errno;
    } else {
      if (passcred != 0)
        (void)::setsockopt(fresh.get(), SOL_SOCKET, SO_PASSCRED, &passcred, sizeof passcred);
      if (::connect(fresh.get(), target_sa, target_len) != 0)
        err = errno;
    }
    act_as_self(*c.w);
    if (err != 0)
      return c.fail(err); // EAGAIN: the listener's backlog is full
    if (fl >= 0 && (fl & O_NONBLOCK) == 0)
      (void)::fcntl(fresh.get(), F_SETFL, ::fcntl(fresh.get(), F_GETFL) & ~O_NONBLOCK);
    if (!c.listener().install_fd(n.id, fresh.get(), sock, caller_cloexec(c.caller, sock)))
      return c.gone();
    c.succeed(0);
  }
  if (d.verdict == pol::action::warn)
    warn(c, canon, d);
}

int syscall_mediator::worker_socket(call& c, int domain, int type) {
  auto& w = *c.w;
  if (!own_netns_) {
    own_netns_.reset(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (!own_netns_)
      return -1;
  }
  if (!w.netns) {
    unique_fd ns(c.caller.open_at("ns/net", O_RDONLY));
    if (!ns)
      return -1;
    w.netns = std::move(ns);
  }
  // A socket belongs to the network namespace of the thread that creates
  // it: made in the supervisor's, the worker could bind abstract names in
  // the host's. setns(CLONE_NEWNET) changes this thread only.
  {
    mediation::raised_capabilities step(mediation::setns_cap());
    if (::setns(w.netns.get(), CLONE_NEWNET) != 0) {
      if (errno != EPERM)
        return -1;
      // A supervisor without CAP_SYS_ADMIN in its own user namespace (one
      // that runs unprivileged) cannot enter the worker's network namespace
      // from here; a child of it can, through the worker's user namespace,
      // which the supervisor owns.
      if (!w.userns) {
        unique_fd ns(c.caller.open_at("ns/user", O_RDONLY));
        if (!ns)
          return -1;
        w.userns = std::move(ns);
      }
      return socket_in_namespaces(w.userns.get(), w.netns.get(), domain, type);
    }
  }
  const int fd = ::socket(domain, type, 0);
  const int err = errno;
  {
    mediation::raised_capabilities step(mediation::setns_cap());
    if (::setns(own_netns_.get(), CLONE_NEWNET) != 0) {
      // This thread would go on in a worker's namespace: not recoverable.
      spdlog::critical("pool event source: cannot leave a worker's network namespace: {}",
                       std::strerror(errno));
      std::abort();
    }
  }
  errno = err;
  return fd;
}

int64_t syscall_mediator::unix_send(call& c, int sock, const std::string& path,
                                    const mediated_message& m, int flags, bool& answered) {
  auto& w = *c.w;
  answered = false;
  std::string abs;
  if (int err = absolute(c.caller, AT_FDCWD, path, abs); err != 0)
    return -err;
  unique_fd object(open_in_root(w.root.get(), abs, O_PATH | O_CLOEXEC));
  if (!object)
    return -errno;
  struct stat st;
  if (::fstat(object.get(), &st) != 0)
    return -errno;
  if (!S_ISSOCK(st.st_mode))
    return -ECONNREFUSED;
  std::string canon;
  if (int err = fd_path(object.get(), canon); err != 0)
    return -err;
  const pol::decision d =
      rules_only(policy_->check_fs(canon, pol::to_access(pol::fs_perm::write_file)));
  if (d.verdict == pol::action::deny) {
    deny(c, canon, d);
    answered = true;
    return 0;
  }
  unique_fd dup;
  if (int err = c.caller.dup_fd(sock, dup); err != 0)
    return -err;
  sockaddr_un target;
  const socklen_t target_len = magic_address(object.get(), target);
  iovec iov{const_cast<char*>(m.data.data()), m.data.size()};
  msghdr h{};
  h.msg_name = &target;
  h.msg_namelen = target_len;
  h.msg_iov = &iov;
  h.msg_iovlen = 1;
  std::vector<char> control;
  if (!m.fds.empty()) {
    control.resize(CMSG_SPACE(m.fds.size() * sizeof(int)));
    h.msg_control = control.data();
    h.msg_controllen = control.size();
    cmsghdr* cm = CMSG_FIRSTHDR(&h);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(m.fds.size() * sizeof(int));
    for (std::size_t i = 0; i < m.fds.size(); ++i) {
      const int fd = m.fds[i].get();
      std::memcpy(CMSG_DATA(cm) + i * sizeof(int), &fd, sizeof fd);
    }
  }
  if (!act_as_worker(w))
    return -EACCES;
  // Never wait for a full receiver on this thread.
  const ssize_t sent = ::sendmsg(dup.get(), &h, flags | MSG_DONTWAIT | MSG_NOSIGNAL);
  const int err = errno;
  act_as_self(*c.w);
  if (sent < 0)
    return -err;
  if (d.verdict == pol::action::warn)
    warn(c, canon, d);
  return sent;
}

void syscall_mediator::decide_send(mediated_worker&, call& c, mediation_result& r) {
  const auto& n = c.n;
  const int sock = static_cast<int>(n.args[0]);
  auto& mem = c.caller;
  auto carry_on = [&] {
    if (!c.listener().respond_continue(n.id))
      return c.gone();
    if (r.what != mediation_result::outcome::warn)
      r.what = mediation_result::outcome::allow;
  };
  const bool unix_decided = (decided_fs_ & pol::to_access(pol::fs_perm::write_file)) != 0;
  // The socket's own domain and type decide (socket_domain).
  int domain = AF_UNSPEC;
  bool ip_datagram = false;
  {
    unique_fd dup;
    if (int err = c.caller.dup_fd(sock, dup); err != 0)
      return c.fail(err);
    domain = socket_domain(dup.get());
    const int type = socket_type(dup.get());
    if (domain < 0 || type < 0)
      return c.fail(domain < 0 ? -domain : -type);
    ip_datagram = decided_net_ && is_ip_domain(domain) && type == SOCK_DGRAM;
  }
  // Performs one message: on the caller's socket through unix_send for a
  // pathname destination, else with the copied address as it was decided.
  auto perform = [&](const std::vector<iovec>& iov, uint64_t control_addr, std::size_t control_len,
                     const mediated_address& a, int flags, bool& answered) -> int64_t {
    answered = false;
    mediated_message m;
    if (int err = copy_message(c.caller, sock, iov, control_addr, control_len, m); err != 0)
      return -err;
    const std::string path = a.unix_path();
    if (!path.empty()) {
      if (!m.ip_control.empty())
        return -EOPNOTSUPP;
      return unix_send(c, sock, path, m, flags, answered);
    }
    if (!m.fds.empty())
      return -EOPNOTSUPP;
    unique_fd dup;
    if (int err = c.caller.dup_fd(sock, dup); err != 0)
      return -err;
    // As decided: a datagram socket (the fd number may name another by now;
    // a stream socket's Fast Open send would connect out of the worker's
    // Landlock domain).
    if (socket_domain(dup.get()) != domain)
      return -EINVAL;
    if ((a.family() == AF_INET || a.family() == AF_INET6 || ip_datagram) &&
        socket_type(dup.get()) != SOCK_DGRAM)
      return -EINVAL;
    iovec one{m.data.data(), m.data.size()};
    msghdr out{};
    if (a.length != 0) {
      out.msg_name = const_cast<sockaddr_storage*>(&a.storage);
      out.msg_namelen = a.length;
    }
    out.msg_iov = &one;
    out.msg_iovlen = 1;
    if (!m.ip_control.empty()) {
      out.msg_control = m.ip_control.data();
      out.msg_controllen = m.ip_control.size();
    }
    if (!act_as_worker(*c.w))
      return -EACCES;
    // Only the flags that shape the datagram: no MSG_ZEROCOPY (the buffer
    // is freed on return), no MSG_FASTOPEN, nothing that waits.
    const int shaping = MSG_CONFIRM | MSG_DONTROUTE | MSG_MORE | MSG_EOR | MSG_OOB;
    const ssize_t sent = ::sendmsg(dup.get(), &out, (flags & shaping) | MSG_DONTWAIT | MSG_NOSIGNAL);
    const int err = errno;
    act_as_self(*c.w);
    return sent < 0 ? -err : sent;
  };
  // Decides one destination: true = may go on (possibly with a warning),
  // false = answered. `perform` is set when the supervisor sends the message
  // itself: to a decided pathname destination (`path`), or from a datagram
  // socket to the IP address as it was decided.
  auto admit = [&](const mediated_address& a, std::string& path, bool& ours) -> bool {
    path.clear();
    ours = false;
    if (ip_datagram) {
      // Every send of a decided datagram socket is made here: to an IP
      // address as it was decided, or, with none, to the peer its
      // (performed, so decided) connect gave it. Another family would be
      // read again by the kernel (AF_UNSPEC as AF_INET).
      if (a.length == 0) {
        ours = true;
        return true;
      }
      if (a.family() != AF_INET && a.family() != AF_INET6) {
        c.fail(EAFNOSUPPORT);
        return false;
      }
    } else if (domain == AF_UNIX && a.length != 0 && a.family() != AF_UNIX &&
               (unix_decided || decided_net_)) {
      c.fail(EINVAL); // what the kernel answers; never read again
      return false;
    } else if (is_ip_domain(domain) && a.length != 0 && a.family() != AF_INET &&
               a.family() != AF_INET6 && decided_net_) {
      c.fail(EAFNOSUPPORT); // a stream socket's: refused, not read again
      return false;
    }
    switch (a.family()) {
    case AF_INET:
    case AF_INET6:
      return !decided_net_ || admit_ip(c, sock, a, ours);
    case AF_UNIX:
      if (unix_decided)
        path = a.unix_path();
      ours = !path.empty();
      return true;
    default:
      return true;
    }
  };

  if (n.nr == SYS_sendto) {
    mediated_address a;
    if (int err = copy_address(c.caller, n.args[4], n.args[5], a); err != 0)
      return c.fail(err);
    if (!c.still_waiting())
      return c.gone();
    std::string path;
    bool perform_it = false;
    if (!admit(a, path, perform_it))
      return;
    if (!perform_it)
      return carry_on();
    const std::vector<iovec> iov{
        {reinterpret_cast<void*>(n.args[1]), static_cast<std::size_t>(n.args[2])}};
    bool answered = false;
    const int64_t sent = perform(iov, 0, 0, a, static_cast<int>(n.args[3]), answered);
    if (answered)
      return;
    return sent < 0 ? c.fail(static_cast<int>(-sent)) : c.succeed(sent);
  }

  if (n.nr == SYS_sendmsg) {
    msghdr h{};
    if (!mem.read(n.args[1], &h, sizeof h))
      return c.fail(EFAULT);
    mediated_address a;
    if (int err = copy_address(c.caller, reinterpret_cast<uint64_t>(h.msg_name), h.msg_namelen, a);
        err != 0)
      return c.fail(err);
    if (!c.still_waiting())
      return c.gone();
    std::string path;
    bool perform_it = false;
    if (!admit(a, path, perform_it))
      return;
    if (!perform_it)
      return carry_on();
    std::vector<iovec> iov;
    if (int err = read_iovs(c.caller, h, iov); err != 0)
      return c.fail(err);
    bool answered = false;
    const int64_t sent = perform(iov, reinterpret_cast<uint64_t>(h.msg_control), h.msg_controllen,
                                 a, static_cast<int>(n.args[2]), answered);
    if (answered)
      return;
    return sent < 0 ? c.fail(static_cast<int>(-sent)) : c.succeed(sent);
  }

  // sendmmsg: every destination is decided; with a pathname destination
  // among them, the first message is performed here and the call answers
  // 1 (a partial count, which callers of sendmmsg handle).
  const uint64_t vec = n.args[1];
  const uint64_t vlen = std::min<uint64_t>(n.args[2] & 0xFFFFFFFFu, max_mmsg);
  if (vlen == 0)
    return carry_on();
  std::vector<mmsghdr> msgs(vlen);
  if (!mem.read(vec, msgs.data(), msgs.size() * sizeof(mmsghdr)))
    return c.fail(EFAULT);
  std::vector<mediated_address> addrs(vlen);
  for (uint64_t i = 0; i < vlen; ++i)
    if (int err = copy_address(c.caller, reinterpret_cast<uint64_t>(msgs[i].msg_hdr.msg_name),
                               msgs[i].msg_hdr.msg_namelen, addrs[i]);
        err != 0)
      return c.fail(err);
  if (!c.still_waiting())
    return c.gone();
  bool any_performed = false;
  bool first_performed = false;
  for (uint64_t i = 0; i < vlen; ++i) {
    std::string path;
    bool perform_it = false;
    if (!admit(addrs[i], path, perform_it))
      return;
    any_performed = any_performed || perform_it;
    if (i == 0)
      first_performed = perform_it;
  }
  if (!any_performed)
    return carry_on();
  // Only a message decided as this thread's to send is sent here: the
  // first one. A batch whose first message is not (an abstract or unnamed
  // destination, which the kernel's own checks must see from the caller)
  // while a later one is cannot be split safely.
  if (!first_performed)
    return c.fail(EOPNOTSUPP);
  std::vector<iovec> iov;
  if (int err = read_iovs(c.caller, msgs[0].msg_hdr, iov); err != 0)
    return c.fail(err);
  bool answered = false;
  const int64_t sent =
      perform(iov, reinterpret_cast<uint64_t>(msgs[0].msg_hdr.msg_control),
              msgs[0].msg_hdr.msg_controllen, addrs[0], static_cast<int>(n.args[3]), answered);
  if (answered)
    return;
  if (sent < 0)
    return c.fail(static_cast<int>(-sent));
  const auto len = static_cast<unsigned>(sent);
  if (!mem.write(vec + offsetof(mmsghdr, msg_len), &len, sizeof len))
    return c.fail(EFAULT);
  c.succeed(1);
}

} // namespace castellan
