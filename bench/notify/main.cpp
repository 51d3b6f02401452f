/// @file main.cpp
/// The cost of a decided system call. In one run, each loop of
/// test/support/notify_probe.c (command mode) under two policies:
///  - the default policy (nothing decided: the kernel alone);
///  - the same policy with carve-outs the supervisor decides: a write and
///    mkdir denial under /tmp/never and a net deny rule, so that
///      open(O_WRONLY)/close: the open goes through seccomp user notification
///        (path copied, opened by the supervisor in the worker's root,
///        decided, fd injected);
///      mkdir: path copied, parent resolved in the root, decided, made by
///        the supervisor as the worker (the untimed rmdir is not decided);
///      connect of a UDP socket to 127.0.0.1: address copied, the socket's
///        type read through pidfd_getfd, decided against the net rules,
///        continued in the kernel;
///  - and the floor: a bare notification round trip (a forked child's
///    getppid answered with a value by this process), with
///    SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP where the kernel has it.
/// Prints p50 and p99 of each and the latency added per decided call.
///
/// Usage: bench_notify [calls]   (default 20000 per loop)

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/actor_system_setup.hpp"
#include "actors/policy/engine/ip.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_actor.hpp"
#include "actors/pool/pool_policy.hpp"
#include "platform/install_layout.hpp"
#include "platform/linux/fd_passing.hpp"
#include "platform/linux/seccomp_notify.hpp"
#include "support/percentiles.hpp"

namespace {

using namespace castellan;

struct percentiles {
  double p50_us = 0;
  double p99_us = 0;
  bool ok = false;
  std::string error;
};

/// The loops of one policy, each in the same pool.
struct loops {
  percentiles open;
  percentiles mkdir;
  percentiles connect;
};

/// Runs the probe's loops in a pool under `doc`.
loops sandboxed_loops(caf::actor_system& sys, policy::policy_document doc,
                      const std::string& probe, long calls) {
  loops out;
  pool_config pc;
  pc.size = 1;
  const std::string dir = probe.substr(0, probe.find_last_of('/'));
  policy::fs_rule fs;
  fs.verdict = policy::action::allow;
  fs.path = dir;
  fs.perms = policy::to_access(policy::fs_perm::read_file) |
             policy::to_access(policy::fs_perm::read_dir) |
             policy::to_access(policy::fs_perm::execute);
  doc.fs_rules.push_back(fs);
  policy::exec_rule ex;
  ex.verdict = policy::action::allow;
  ex.path = probe;
  doc.exec_rules.push_back(ex);
  auto fail_all = [&](const std::string& why) {
    for (auto* p : {&out.open, &out.mkdir, &out.connect})
      p->error = why;
    return out;
  };
  if (auto ok = apply_policy(doc, pc); !ok)
    return fail_all(ok.error().describe());
  auto pool = spawn_pool(sys, pc);
  if (!pool)
    return fail_all(pool.error().describe());
  caf::scoped_actor self{sys};
  auto run = [&](std::vector<std::string> argv, percentiles& p) {
    exec_request req;
    req.argv = std::move(argv);
    req.timeout_ms = 120000;
    self->request(*pool, std::chrono::minutes(3), exec_atom::value, req)
      .receive(
        [&](exec_result& r) {
          long p50 = 0;
          long p99 = 0;
          if (std::sscanf(r.stdout_data.c_str(), "p50_ns %ld p99_ns %ld", &p50, &p99) == 2) {
            p.p50_us = static_cast<double>(p50) / 1000.0;
            p.p99_us = static_cast<double>(p99) / 1000.0;
            p.ok = true;
          } else {
            p.error = "probe: " + r.stdout_data + r.stderr_data + r.detail;
          }
        },
        [&](caf::error& e) { p.error = sys.render(e); });
  };
  const std::string n = std::to_string(calls);
  run({probe, "bench", "/tmp/bench-file", n}, out.open);
  run({probe, "bench-mkdir", "/tmp/bench-dir", n}, out.mkdir);
  run({probe, "bench-connect", "9", n}, out.connect);
  caf::anon_send(*pool, shutdown_atom::value);
  return out;
}

/// A bare notification round trip: the child calls getppid `n` times, each
/// answered by this thread with a value.
percentiles bare_round_trip(long n, bool& sync_wakeup) {
  percentiles out;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    out.error = "socketpair";
    return out;
  }
  int results[2];
  if (::pipe2(results, O_CLOEXEC) != 0) {
    out.error = "pipe";
    return out;
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(pair[0]);
    ::close(results[0]);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(1);
    platform::notify_spec spec;
    spec.syscalls = {"getppid"};
    auto listener = platform::install_notify_filter(spec);
    if (!listener || !platform::send_fd(pair[1], listener->get()))
      ::_exit(2);
    listener->reset();
    std::vector<long> ns(static_cast<std::size_t>(n));
    for (long i = 0; i < n; ++i) {
      timespec a;
      timespec b;
      ::clock_gettime(CLOCK_MONOTONIC, &a);
      (void)::syscall(SYS_getppid);
      ::clock_gettime(CLOCK_MONOTONIC, &b);
      ns[static_cast<std::size_t>(i)] = (b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec);
    }
    const auto bytes = static_cast<std::size_t>(n) * sizeof(long);
    (void)!::write(results[1], ns.data(), bytes);
    ::_exit(0);
  }
  ::close(pair[1]);
  ::close(results[1]);
  auto fd = platform::receive_fd(pair[0]);
  ::close(pair[0]);
  if (!fd || !fd->fd) {
    out.error = fd ? "the child sent no listener" : fd.error().describe();
    return out;
  }
  platform::notify_listener listener(std::move(fd->fd));
  sync_wakeup = listener.set_sync_wakeup();
  for (long i = 0; i < n; ++i) {
    auto note = listener.receive();
    if (!note) {
      out.error = note.error().describe();
      break;
    }
    (void)listener.respond_value(note->id, 1);
  }
  std::vector<long> ns(static_cast<std::size_t>(n));
  std::size_t got = 0;
  const std::size_t want = static_cast<std::size_t>(n) * sizeof(long);
  while (got < want) {
    const ssize_t r = ::read(results[0], reinterpret_cast<char*>(ns.data()) + got, want - got);
    if (r <= 0)
      break;
    got += static_cast<std::size_t>(r);
  }
  ::close(results[0]);
  ::waitpid(pid, nullptr, 0);
  if (got != want) {
    if (out.error.empty())
      out.error = "child reported no samples";
    return out;
  }
  bench::samples s;
  for (long v : ns)
    s.add(static_cast<double>(v) / 1000.0);
  out.p50_us = s.percentile(0.50);
  out.p99_us = s.percentile(0.99);
  out.ok = true;
  return out;
}

} // namespace

int main(int argc, char** argv) {
  const long calls = argc > 1 ? std::atol(argv[1]) : 20000;
  if (calls <= 0) {
    std::fprintf(stderr, "usage: bench_notify [calls]\n");
    return 2;
  }
  auto layout = platform::find_install_layout();
  if (!layout || layout->policies_dir.empty()) {
    std::fprintf(stderr, "bench_notify: cannot find the install layout (policies)\n");
    return 1;
  }
  char self_exe[4096];
  const ssize_t len = ::readlink("/proc/self/exe", self_exe, sizeof self_exe - 1);
  if (len <= 0)
    return 1;
  self_exe[len] = '\0';
  std::string build = self_exe;
  build = build.substr(0, build.find_last_of('/')); // bin
  build = build.substr(0, build.find_last_of('/'));
  const std::string probe = build + "/test-bin/notify_probe";
  if (::access(probe.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "bench_notify: %s not found (build the notify_probe target)\n",
                 probe.c_str());
    return 1;
  }
  const std::string dir = layout->policies_dir;
  auto plain = policy::load_policy(dir + "/default.json", dir);
  if (!plain) {
    std::fprintf(stderr, "bench_notify: %s\n", plain.to_failure().describe().c_str());
    return 1;
  }
  // `default` denies the sandbox's own addresses too, so it gets no loopback
  // and the connect loop has nothing to connect to. Not decided: network
  // allowed by default (the loopback comes up, nothing local can be stopped,
  // so the kernel alone answers; this pool has no egress proxy, so nothing
  // leaves the sandbox either).
  policy::policy_document decided = *plain;
  plain->defaults.net = policy::action::allow;
  // Decided: the same policy allows UDP to 127.0.0.1:9 by a rule, and with
  // its carve-outs opens for writing, mkdir and the calls with an address
  // are decided.
  policy::net_rule local;
  local.verdict = policy::action::allow;
  local.proto = policy::net_proto::udp;
  local.cidr = *policy::parse_cidr("127.0.0.1/32");
  local.cidr_text = "127.0.0.1/32";
  local.ports = {{9, 9}};
  local.ports_text = "9";
  decided.net_rules.push_back(local);
  policy::fs_rule carve;
  carve.verdict = policy::action::deny;
  carve.path = "/tmp/never";
  carve.perms = policy::to_access(policy::fs_perm::write_file) |
                policy::to_access(policy::fs_perm::make_dir);
  decided.fs_rules.push_back(carve);
  policy::net_rule net;
  net.verdict = policy::action::deny;
  net.proto = policy::net_proto::tcp;
  net.cidr = *policy::parse_cidr("203.0.113.0/24");
  net.cidr_text = "203.0.113.0/24";
  net.ports = {{0, 65535}};
  net.ports_text = "0-65535";
  decided.net_rules.push_back(net);

  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  bool sync = false;
  auto floor = bare_round_trip(calls, sync);
  auto base = sandboxed_loops(sys, *plain, probe, calls);
  auto med = sandboxed_loops(sys, decided, probe, calls);
  for (const auto* p : {&floor, &base.open, &base.mkdir, &base.connect, &med.open, &med.mkdir,
                        &med.connect})
    if (!p->ok) {
      std::fprintf(stderr, "bench_notify: %s\n", p->error.c_str());
      return 1;
    }
  std::printf("seccomp user notification, %ld calls each (µs per call)\n", calls);
  std::printf("%-48s %9s %9s\n", "", "p50", "p99");
  std::printf("%-48s %9.2f %9.2f\n",
              sync ? "bare round trip (getppid, sync wake-up)" : "bare round trip (getppid)",
              floor.p50_us, floor.p99_us);
  auto rows = [](const char* what, const percentiles& not_decided, const percentiles& d) {
    std::printf("%-48s %9.2f %9.2f\n", (std::string(what) + ", not decided").c_str(),
                not_decided.p50_us, not_decided.p99_us);
    std::printf("%-48s %9.2f %9.2f\n", (std::string(what) + ", decided").c_str(), d.p50_us,
                d.p99_us);
    std::printf("%-48s %9.2f %9.2f\n", "  added per decided call", d.p50_us - not_decided.p50_us,
                d.p99_us - not_decided.p99_us);
  };
  rows("open+close in a sandbox", base.open, med.open);
  rows("mkdir in a sandbox", base.mkdir, med.mkdir);
  rows("connect (UDP, 127.0.0.1) in a sandbox", base.connect, med.connect);
  return 0;
}
