// seccomp user notification and the hostile-memory reader, against the real
// kernel: a forked child loads the notify filter and hands its listener over
// a socketpair; this process answers its calls.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>
#include <sys/stat.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "platform/linux/fd_passing.hpp"
#include "platform/linux/process_memory.hpp"
#include "platform/linux/seccomp_notify.hpp"
#include "support/skip.hpp"

using namespace castellan;
using namespace castellan::platform;

namespace {

/// A child that loads a notify filter for openat (writes only), sends the
/// listener, then opens `path` for writing and reports the outcome: writes
/// "ok" into the fd it got back, or exits with the errno.
struct notified_child {
  pid_t pid = -1;
  unique_fd sock;
  char path[64] = "/notify-test/target";

  void start() {
    int pair[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
    pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pair[0]);
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        ::_exit(100);
      notify_spec spec;
      spec.syscalls = {"openat"};
      spec.open_writes_only = true;
      auto listener = install_notify_filter(spec);
      if (!listener)
        ::_exit(101);
      if (!send_fd(pair[1], listener->get()))
        ::_exit(102);
      listener->reset();
      // Reads are not in the filter: they reach the kernel directly.
      const int ro = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (ro < 0)
        ::_exit(103);
      ::close(ro);
      const int fd = ::open(path, O_WRONLY | O_CLOEXEC);
      if (fd < 0)
        ::_exit(errno);
      ::_exit(::write(fd, "ok", 2) == 2 ? 0 : 104);
    }
    ::close(pair[1]);
    sock.reset(pair[0]);
  }

  int wait() const {
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
  }
};

} // namespace

BOOST_AUTO_TEST_SUITE(seccomp_notify_tests)

BOOST_AUTO_TEST_CASE(a_write_open_is_answered_with_an_injected_fd) {
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  notified_child child;
  child.start();
  auto fd = receive_fd(child.sock.get());
  BOOST_REQUIRE_MESSAGE(fd, (fd ? "" : fd.error().describe()));
  BOOST_REQUIRE(fd->fd);
  notify_listener listener(std::move(fd->fd));
  (void)listener.set_sync_wakeup(); // optional (Linux 6.6)
  auto n = listener.receive();
  BOOST_REQUIRE_MESSAGE(n, (n ? "" : n.error().describe()));
  BOOST_TEST(n->nr == SYS_openat);
  BOOST_TEST(n->pid == child.pid);
  process_memory mem(n->pid);
  auto path = mem.read_string(n->args[1], 4095);
  BOOST_REQUIRE_MESSAGE(path, (path ? "" : path.error().describe()));
  BOOST_TEST(*path == "/notify-test/target");
  BOOST_TEST(listener.id_valid(n->id));
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  unique_fd rd(pipe_fds[0]);
  unique_fd wr(pipe_fds[1]);
  auto injected = listener.respond_with_fd(n->id, wr.get(), true);
  BOOST_REQUIRE_MESSAGE(injected, (injected ? "" : injected.error().describe()));
  BOOST_TEST(*injected >= 0);
  wr.reset();
  BOOST_TEST(child.wait() == 0);
  char buf[4] = {};
  BOOST_TEST(::read(rd.get(), buf, sizeof buf) == 2);
  BOOST_TEST(std::string(buf, 2) == "ok");
  // Answered: the id is no longer pending.
  BOOST_TEST(!listener.id_valid(n->id));
}

BOOST_AUTO_TEST_CASE(a_denial_is_the_errno_the_caller_sees) {
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  notified_child child;
  child.start();
  auto fd = receive_fd(child.sock.get());
  BOOST_REQUIRE(fd);
  BOOST_REQUIRE(fd->fd);
  notify_listener listener(std::move(fd->fd));
  auto n = listener.receive();
  BOOST_REQUIRE(n);
  BOOST_TEST(listener.respond_error(n->id, EACCES).has_value());
  BOOST_TEST(child.wait() == EACCES);
}

BOOST_AUTO_TEST_CASE(an_unknown_syscall_name_is_refused) {
  notify_spec spec;
  spec.syscalls = {"opneat"};
  auto r = install_notify_filter(spec); // fails before anything is loaded
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().describe().find("opneat") != std::string::npos);
  BOOST_TEST(!install_notify_filter(notify_spec{}));
}

extern "C" void ignore_signal(int) {}

namespace {

/// A child that has the supervisor decide its write-opens and opens
/// `opens` times; every answer must be a pipe. An open that returns 0 (a
/// lost answer) ends it with 103 unless `zeros_allowed`; the number of them
/// is written on the socket before it exits 0.
struct open_loop_child {
  pid_t pid = -1;
  unique_fd sock;
  notify_listener listener;

  static open_loop_child start(int opens, bool zeros_allowed) {
    int pair[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
    const pid_t pid = ::fork();
    BOOST_REQUIRE(pid >= 0);
    if (pid == 0) {
      ::close(pair[0]);
      if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        ::_exit(100);
      notify_spec spec;
      spec.syscalls = {"openat"};
      spec.open_writes_only = true;
      auto listener = install_notify_filter(spec);
      if (!listener || !send_fd(pair[1], listener->get()))
        ::_exit(101);
      listener->reset();
      int zeros = 0;
      for (int i = 0; i < opens; ++i) {
        const int fd = ::open("/notify-test/pipe", O_WRONLY | O_CLOEXEC);
        if (fd == 0 && zeros_allowed) {
          ++zeros; // fd 0 stays what it was
          continue;
        }
        struct stat st;
        if (fd <= 0 || ::fstat(fd, &st) != 0 || !S_ISFIFO(st.st_mode))
          ::_exit(103);
        ::close(fd);
      }
      if (::write(pair[1], &zeros, sizeof zeros) != sizeof zeros)
        ::_exit(104);
      ::_exit(0);
    }
    ::close(pair[1]);
    unique_fd sock(pair[0]);
    auto got = receive_fd(sock.get());
    BOOST_REQUIRE(got);
    BOOST_REQUIRE(got->fd);
    return {pid, std::move(sock), notify_listener(std::move(got->fd))};
  }

  /// The zeros it counted, and how it ended.
  std::pair<int, int> finish() {
    int zeros = -1;
    if (::read(sock.get(), &zeros, sizeof zeros) != static_cast<ssize_t>(sizeof zeros))
      zeros = -1;
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return {zeros, st};
  }
};

/// Signals this thread (SIGUSR1, handled, `restart` as SA_RESTART) as fast
/// as another thread can, until destroyed.
class interrupter {
public:
  explicit interrupter(bool restart) : target_(::pthread_self()) {
    struct sigaction sa {};
    sa.sa_handler = ignore_signal;
    sa.sa_flags = restart ? SA_RESTART : 0;
    ::sigemptyset(&sa.sa_mask);
    BOOST_REQUIRE(::sigaction(SIGUSR1, &sa, &old_) == 0);
    thread_ = std::thread([this] {
      while (!done_.load(std::memory_order_relaxed)) {
        ::pthread_kill(target_, SIGUSR1);
        std::this_thread::yield();
      }
    });
  }
  ~interrupter() {
    done_ = true;
    thread_.join();
    ::sigaction(SIGUSR1, &old_, nullptr);
  }

private:
  pthread_t target_;
  struct sigaction old_ {};
  std::atomic<bool> done_{false};
  std::thread thread_;
};

} // namespace

BOOST_AUTO_TEST_CASE(an_injected_fd_survives_interruptions_of_the_answering_thread) {
  // The thread that answers may be interrupted while the kernel waits for
  // the caller to take the fd: a signal, or io_uring task work (a plain
  // ring's completions are task work for the thread that submitted). Every
  // open must still get the very fd it was answered with, never a number
  // the kernel made up.
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  constexpr int opens = 3000;
  auto child = open_loop_child::start(opens, false);
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  unique_fd rd(pipe_fds[0]);
  unique_fd wr(pipe_fds[1]);
  int answered = 0;
  int failed = 0;
  std::string first_failure;
  {
    interrupter signals(true);
    while (answered + failed < opens) {
      auto n = child.listener.receive();
      if (!n) {
        if (n.error().code == EINTR)
          continue; // the receive itself was interrupted: nothing lost
        if (first_failure.empty())
          first_failure = n.error().describe(); // ENOENT: the caller is gone
        break;
      }
      if (auto r = child.listener.respond_with_fd(n->id, wr.get(), true); r) {
        ++answered;
      } else {
        ++failed;
        if (first_failure.empty())
          first_failure = r.error().describe();
      }
    }
  }
  auto [zeros, st] = child.finish();
  BOOST_TEST(failed == 0, failed << " answers failed, the first: " << first_failure);
  BOOST_TEST(answered == opens, first_failure);
  BOOST_TEST(zeros == 0);
  BOOST_TEST(WIFEXITED(st));
  BOOST_TEST(WEXITSTATUS(st) == 0, "the caller got a wrong fd (exit " << WEXITSTATUS(st) << ")");
}

BOOST_AUTO_TEST_CASE(a_one_step_fd_answer_that_is_interrupted_is_reported_lost) {
  // send_fd (SECCOMP_ADDFD_FLAG_SEND) is for threads nothing interrupts.
  // Interrupted all the same, the caller's open returns 0: each such answer
  // must be reported (EINPROGRESS), every other one must be the very fd.
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  constexpr int opens = 3000;
  auto child = open_loop_child::start(opens, true);
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  unique_fd rd(pipe_fds[0]);
  unique_fd wr(pipe_fds[1]);
  int answered = 0;
  int lost = 0;
  int failed = 0;
  std::string first_failure;
  {
    interrupter signals(false); // no SA_RESTART: the ioctl sees EINTR
    while (answered + lost + failed < opens) {
      auto n = child.listener.receive();
      if (!n) {
        if (n.error().code == EINTR)
          continue;
        if (first_failure.empty())
          first_failure = n.error().describe();
        break;
      }
      if (auto r = child.listener.send_fd(n->id, wr.get(), true); r) {
        ++answered;
      } else if (r.error().code == EINPROGRESS) {
        ++lost;
      } else {
        ++failed;
        if (first_failure.empty())
          first_failure = r.error().describe();
      }
    }
  }
  auto [zeros, st] = child.finish();
  BOOST_TEST_MESSAGE("one-step fd answers: " << answered << " delivered, " << lost
                                             << " interrupted and reported");
  BOOST_TEST(failed == 0, failed << " answers failed, the first: " << first_failure);
  BOOST_TEST(answered + lost == opens, first_failure);
  BOOST_TEST(zeros == lost, "the caller got 0 " << zeros << " times, " << lost << " reported");
  BOOST_TEST(WIFEXITED(st));
  BOOST_TEST(WEXITSTATUS(st) == 0, "the caller got a wrong fd (exit " << WEXITSTATUS(st) << ")");
}

namespace {

/// A child that loads a notify filter for `calls`, hands its listener over
/// by number on `sock` (the pool's way), closes its copy and runs `body`;
/// its exit code is `body`'s.
template <class Body>
pid_t start_handover_child(int parent_end, int child_end, std::vector<std::string> calls,
                           Body body) {
  BOOST_REQUIRE(prepare_listener_handover(parent_end).has_value());
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(parent_end);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(100);
    notify_spec spec;
    spec.syscalls = std::move(calls);
    auto listener = install_notify_filter(spec);
    if (!listener)
      ::_exit(101);
    if (!hand_over_listener(child_end, listener->get()))
      ::_exit(102);
    listener->reset();
    ::_exit(body());
  }
  ::close(child_end);
  return pid;
}

/// The listener the child named, once its message is there.
notify_listener take(int sock) {
  pollfd p{sock, POLLIN, 0};
  BOOST_REQUIRE_MESSAGE(::poll(&p, 1, 30000) == 1, "the child did not hand its listener over in 30 s");
  auto fd = take_listener(sock);
  BOOST_REQUIRE_MESSAGE(fd, (fd ? "" : fd.error().describe()));
  return notify_listener(std::move(*fd));
}

/// Kills the child if a failed check leaves it waiting for an answer.
struct reaped_child {
  pid_t pid = -1;
  ~reaped_child() {
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  }
  int wait() {
    int st = 0;
    ::waitpid(pid, &st, 0);
    pid = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
  }
};

volatile sig_atomic_t usr1_seen = 0;

/// What /proc says about a task: its state letter, where it sleeps, and the
/// signals pending for its whole process.
struct task_view {
  char state = '?';
  std::string wchan;
  unsigned long long shared_pending = 0;
};

std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "re")) {
    char buf[4096];
    std::size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
      out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

task_view read_task(pid_t pid) {
  const std::string dir = "/proc/" + std::to_string(pid);
  task_view t;
  const std::string stat = slurp(dir + "/stat");
  // The state follows the command name, which may itself hold ')'.
  if (const auto close = stat.rfind(')'); close != std::string::npos && close + 2 < stat.size())
    t.state = stat[close + 2];
  t.wchan = slurp(dir + "/wchan");
  const std::string status = slurp(dir + "/status");
  if (const auto at = status.find("\nShdPnd:"); at != std::string::npos)
    t.shared_pending = std::strtoull(status.c_str() + at + 8, nullptr, 16);
  return t;
}

/// Polls /proc until `ok` holds for `pid` or 30 s pass (a safety net, not a
/// timing assertion); returns the last view either way.
template <class Pred>
task_view wait_for_task(pid_t pid, Pred ok) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    auto t = read_task(pid);
    if (ok(t) || std::chrono::steady_clock::now() >= deadline)
      return t;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(the_listener_is_handed_over_by_number_while_sendmsg_is_decided) {
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  unique_fd control(pair[0]);
  reaped_child child{start_handover_child(pair[0], pair[1], {"sendmsg", "sendto"}, [] {
    int s[2];
    if (::socketpair(AF_UNIX, SOCK_DGRAM, 0, s) != 0)
      return 110;
    // Without an address, sendto is not notified: it reaches the kernel.
    if (::send(s[0], "plain", 5, 0) != 5)
      return 111;
    iovec iov{const_cast<char*>("hello"), 5};
    msghdr h{};
    h.msg_iov = &iov;
    h.msg_iovlen = 1;
    if (::sendmsg(s[0], &h, 0) != 5) // answered by the parent with 5
      return 112;
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    std::strcpy(un.sun_path, "/nonexistent");
    if (::sendto(s[0], "x", 1, 0, reinterpret_cast<sockaddr*>(&un), sizeof un) != -1 ||
        errno != EACCES) // refused by the parent
      return 113;
    return 0;
  })};
  auto listener = take(control.get());
  auto n = listener.receive();
  BOOST_REQUIRE(n);
  BOOST_TEST(n->nr == SYS_sendmsg);
  BOOST_TEST(listener.respond_value(n->id, 5).has_value());
  n = listener.receive();
  BOOST_REQUIRE(n);
  BOOST_TEST(n->nr == SYS_sendto);
  BOOST_TEST(n->args[4] != 0u);
  BOOST_TEST(listener.respond_error(n->id, EACCES).has_value());
  BOOST_TEST(child.wait() == 0);
}

BOOST_AUTO_TEST_CASE(a_received_notification_is_not_interrupted_by_a_signal) {
  utsname u{};
  int major = 0;
  int minor = 0;
  if (::uname(&u) != 0 || std::sscanf(u.release, "%d.%d", &major, &minor) != 2 ||
      major * 100 + minor < 519 || !notify_supported()) {
    castellan::test::skip("SECCOMP_FILTER_FLAG_WAIT_KILLABLE_RECV needs Linux 5.19");
    return;
  }
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  unique_fd control(pair[0]);
  reaped_child child{start_handover_child(pair[0], pair[1], {"getppid"}, [] {
    struct sigaction sa {};
    sa.sa_handler = [](int) { usr1_seen = 1; };
    sa.sa_flags = SA_RESTART;
    if (::sigaction(SIGUSR1, &sa, nullptr) != 0)
      return 110;
    // Answered once, with 42: a signal during the wait must neither cut it
    // short nor make the call be notified a second time.
    const long r = ::syscall(SYS_getppid);
    return r == 42 && usr1_seen == 1 ? 0 : 111;
  })};
  auto listener = take(control.get());
  auto n = listener.receive();
  BOOST_REQUIRE(n);
  BOOST_TEST(n->nr == SYS_getppid);
  // The signal must meet the wait itself, not the way into it: wait until
  // /proc shows the child asleep in the seccomp wait.
  const auto in_seccomp = [](const task_view& t) {
    return (t.state == 'S' || t.state == 'D') && t.wchan.find("seccomp") != std::string::npos;
  };
  const auto asleep = wait_for_task(child.pid, in_seccomp);
  BOOST_REQUIRE_MESSAGE(in_seccomp(asleep),
                        "the child was not seen asleep in the seccomp wait within 30 s (state "
                            << asleep.state << ", wchan " << asleep.wchan << ")");
  BOOST_REQUIRE(::kill(child.pid, SIGUSR1) == 0);
  // The signal wakes the wait; the kernel sees the notification received and
  // puts the child back to sleep, killably ('D'), the signal still pending.
  // Were the wait cut short instead, the handler would run (SIGUSR1 no
  // longer pending) and the restarted call would be notified again. Wait
  // for one outcome or the other rather than for a guessed while.
  constexpr unsigned long long usr1 = 1ull << (SIGUSR1 - 1);
  const auto settled = wait_for_task(child.pid, [&](const task_view& t) {
    return (t.shared_pending & usr1) == 0 || (t.state == 'D' && in_seccomp(t));
  });
  BOOST_TEST((settled.shared_pending & usr1) != 0u,
             "SIGUSR1 was delivered while the call waited (ShdPnd " << std::hex
                                                                   << settled.shared_pending << ")");
  BOOST_TEST(settled.state == 'D', "state " << settled.state << ", wchan " << settled.wchan);
  const bool still_pending = listener.id_valid(n->id);
  BOOST_TEST(still_pending);
  if (!still_pending)
    return; // the child is waiting on a second notification: the guard kills it
  BOOST_TEST(listener.respond_value(n->id, 42).has_value());
  BOOST_TEST(child.wait() == 0);
}

BOOST_AUTO_TEST_CASE(install_fd_puts_a_descriptor_at_the_callers_number) {
  if (!notify_supported()) {
    castellan::test::skip("this kernel has no seccomp user notification");
    return;
  }
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  unique_fd control(pair[0]);
  reaped_child child{start_handover_child(pair[0], pair[1], {"getppid"}, [] {
    if (::syscall(SYS_getppid) != 0)
      return 110;
    return ::write(100, "ok", 2) == 2 ? 0 : 111;
  })};
  auto listener = take(control.get());
  auto n = listener.receive();
  BOOST_REQUIRE(n);
  int pipe_fds[2];
  BOOST_REQUIRE(::pipe2(pipe_fds, O_CLOEXEC) == 0);
  unique_fd rd(pipe_fds[0]);
  unique_fd wr(pipe_fds[1]);
  auto put = listener.install_fd(n->id, wr.get(), 100, true);
  BOOST_REQUIRE_MESSAGE(put, (put ? "" : put.error().describe()));
  BOOST_TEST(listener.respond_value(n->id, 0).has_value());
  wr.reset();
  BOOST_TEST(child.wait() == 0);
  char buf[4] = {};
  BOOST_TEST(::read(rd.get(), buf, sizeof buf) == 2);
  BOOST_TEST(std::string(buf, 2) == "ok");
}

BOOST_AUTO_TEST_CASE(take_listener_refuses_anything_but_a_named_listener) {
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  unique_fd a(pair[0]);
  unique_fd b(pair[1]);
  auto none = take_listener(a.get());
  BOOST_REQUIRE(!none);
  BOOST_TEST(none.error().code == EAGAIN);
  // Without SO_PASSCRED the sender is unknown.
  BOOST_REQUIRE(::send(b.get(), "LISTENER 0", 10, 0) == 10);
  auto anonymous = take_listener(a.get());
  BOOST_REQUIRE(!anonymous);
  BOOST_TEST(anonymous.error().describe().find("credentials") != std::string::npos,
             anonymous.error().describe());
  BOOST_REQUIRE(prepare_listener_handover(a.get()).has_value());
  BOOST_REQUIRE(::send(b.get(), "hello", 5, 0) == 5);
  auto garbage = take_listener(a.get());
  BOOST_REQUIRE(!garbage);
  BOOST_TEST(garbage.error().describe().find("named no listener") != std::string::npos);
  // A real descriptor that is not a listener (our own stdin's number).
  BOOST_REQUIRE(::send(b.get(), "LISTENER 0", 10, 0) == 10);
  auto not_a_listener = take_listener(a.get());
  BOOST_REQUIRE(!not_a_listener);
  BOOST_TEST(not_a_listener.error().describe().find("not a seccomp listener") != std::string::npos,
             not_a_listener.error().describe());
  ::close(b.release());
  auto closed = take_listener(a.get());
  BOOST_REQUIRE(!closed);
  BOOST_TEST(closed.error().code == EPIPE);
}

BOOST_AUTO_TEST_CASE(receive_fd_reports_a_message_without_a_descriptor) {
  int pair[2];
  BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
  unique_fd a(pair[0]);
  unique_fd b(pair[1]);
  BOOST_REQUIRE(::send(b.get(), "x", 1, 0) == 1);
  auto r = receive_fd(a.get());
  BOOST_REQUIRE(r);
  BOOST_TEST(!r->fd.valid());
  BOOST_TEST(!r->closed);
  auto none = receive_fd(a.get(), MSG_DONTWAIT);
  BOOST_REQUIRE(!none);
  BOOST_TEST(none.error().code == EAGAIN);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(process_memory_tests)

namespace {

/// A child that sits still until killed; its memory is a copy of ours.
struct frozen_child {
  pid_t pid = -1;
  frozen_child() {
    pid = ::fork();
    if (pid == 0) {
      for (;;)
        ::pause();
    }
  }
  ~frozen_child() {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
  }
};

} // namespace

BOOST_AUTO_TEST_CASE(strings_and_bytes_are_copied_with_limits) {
  static const char text[] = "/tmp/some/path";
  frozen_child child;
  process_memory mem(child.pid);
  const auto addr = reinterpret_cast<uint64_t>(text);
  auto s = mem.read_string(addr, 4095);
  BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
  BOOST_TEST(*s == text);
  auto longer = mem.read_string(addr, 4);
  BOOST_REQUIRE(!longer);
  BOOST_TEST(longer.error().code == ENAMETOOLONG);
  char buf[5] = {};
  BOOST_TEST(mem.read(addr, buf, 4).has_value());
  BOOST_TEST(std::string(buf) == "/tmp");
  BOOST_TEST(!mem.read_string(0, 4095));
  BOOST_TEST(!mem.read(~uint64_t{0} - 2, buf, 4)); // wraps around
}

BOOST_AUTO_TEST_CASE(reads_through_a_mem_fd_the_caller_holds) {
  static const char text[] = "/tmp/through/mem";
  frozen_child child;
  unique_fd fd(::open(("/proc/" + std::to_string(child.pid) + "/mem").c_str(),
                      O_RDONLY | O_CLOEXEC));
  BOOST_REQUIRE(fd);
  {
    process_memory mem(child.pid, fd.get());
    auto s = mem.read_string(reinterpret_cast<uint64_t>(text), 4095);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    BOOST_TEST(*s == text);
    BOOST_TEST(!mem.read_string(0, 4095));
  }
  // Not closed by the reader: it belongs to whoever lent it.
  BOOST_TEST(::fcntl(fd.get(), F_GETFD) >= 0);
}

BOOST_AUTO_TEST_CASE(a_write_lands_in_the_other_process) {
  static char word[8] = "before";
  frozen_child child;
  process_memory mem(child.pid);
  const auto addr = reinterpret_cast<uint64_t>(word);
  BOOST_REQUIRE(mem.write(addr, "after!", 7).has_value());
  auto s = mem.read_string(addr, 16);
  BOOST_REQUIRE(s);
  BOOST_TEST(*s == "after!");
  BOOST_TEST(std::string(word) == "before"); // ours is untouched
  BOOST_TEST(!mem.write(0, "x", 1));
}

BOOST_AUTO_TEST_CASE(a_string_running_into_an_unmapped_page_is_an_error) {
  const long page = ::sysconf(_SC_PAGESIZE);
  auto* region =
      static_cast<char*>(::mmap(nullptr, static_cast<std::size_t>(page) * 2, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  BOOST_REQUIRE(region != MAP_FAILED);
  BOOST_REQUIRE(::munmap(region + page, static_cast<std::size_t>(page)) == 0);
  std::memset(region, 'a', static_cast<std::size_t>(page)); // no terminator before the hole
  // A string that ends right before the hole is fine.
  region[page - 1] = '\0';
  region[page - 3] = 'z';
  frozen_child child;
  process_memory mem(child.pid);
  auto whole = mem.read_string(reinterpret_cast<uint64_t>(region + page - 3), 4095);
  BOOST_REQUIRE(whole);
  BOOST_TEST(*whole == "za");
  ::munmap(region, static_cast<std::size_t>(page));
  // No terminator before the hole: an error, never a read past it.
  auto* open_ended =
      static_cast<char*>(::mmap(nullptr, static_cast<std::size_t>(page) * 2, PROT_READ | PROT_WRITE,
                                MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  BOOST_REQUIRE(open_ended != MAP_FAILED);
  BOOST_REQUIRE(::munmap(open_ended + page, static_cast<std::size_t>(page)) == 0);
  std::memset(open_ended, 'b', static_cast<std::size_t>(page));
  frozen_child other;
  process_memory mem2(other.pid);
  auto r = mem2.read_string(reinterpret_cast<uint64_t>(open_ended + 16), 8192);
  BOOST_REQUIRE(!r);
  BOOST_TEST(r.error().code == EFAULT);
  ::munmap(open_ended, static_cast<std::size_t>(page));
}

BOOST_AUTO_TEST_SUITE_END()
