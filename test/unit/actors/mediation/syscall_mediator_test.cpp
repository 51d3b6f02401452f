// The mediator on its own, without a pool or any actor: a forked child
// loads the notify filter its policy asks for (notify_spec_for) and this
// process takes its listener (pidfd_getfd); a thread of this process decides its
// calls with syscall_mediator::handle, as the pool's event source does.
// Outside a sandbox the child's root is this machine's "/", so the cases
// work in a directory of their own below /tmp.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/mediation/notify_mapping.hpp"
#include "actors/mediation/syscall_mediator.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "support/build_paths.hpp"
#include "support/skip.hpp"

using namespace castellan;

namespace {

/// A directory of its own below /tmp, removed with what it holds.
struct scratch_dir {
  std::string path;
  scratch_dir() {
    char tmpl[] = "/tmp/castellan-mediator-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~scratch_dir() { (void)std::system(("rm -rf '" + path + "'").c_str()); }
  std::string file(const std::string& name, const std::string& content = "") const {
    const std::string p = path + "/" + name;
    std::ofstream(p) << content;
    return p;
  }
};

/// The default policy plus `rules`, compiled.
std::shared_ptr<const policy::compiled_policy> policy_with(std::vector<policy::fs_rule> rules) {
  const std::string dir = test::source_dir() + "/policies";
  auto doc = policy::load_policy(dir + "/default.json", dir);
  BOOST_REQUIRE_MESSAGE(doc, (doc ? "" : doc.to_failure().describe()));
  for (auto& r : rules)
    doc->fs_rules.push_back(std::move(r));
  return policy::compiled_policy::compile(*doc, "mediator-test");
}

policy::fs_rule deny_rule(const std::string& path, policy::fs_perm perm) {
  policy::fs_rule r;
  r.verdict = policy::action::deny;
  r.path = path;
  r.perms = policy::to_access(perm);
  return r;
}

/// The pointer of the last fs rule of `p` (the one a case added).
std::string last_rule(const policy::compiled_policy& p) {
  return "/fs/rules/" + std::to_string(p.document().fs_rules.size() - 1);
}

/// Runs `body` in a child under the notify filter `p` asks for, decides its
/// calls on a thread of this process until it ends, and returns what each
/// decided call came to. `status` is the child's wait status.
std::vector<mediation_result> run_mediated(const std::shared_ptr<const policy::compiled_policy>& p,
                                           const std::function<int()>& body, int& status) {
  const platform::notify_spec spec = notify_spec_for(p->document());
  BOOST_REQUIRE(!spec.empty());
  // The listener is taken with pidfd_getfd, as the pool takes a worker's:
  // the child tells its number and waits, through pipes (neither read nor
  // write is ever notified; a sendmsg may be).
  int number_pipe[2];
  int go_pipe[2];
  BOOST_REQUIRE(::pipe2(number_pipe, O_CLOEXEC) == 0);
  BOOST_REQUIRE(::pipe2(go_pipe, O_CLOEXEC) == 0);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    ::close(number_pipe[0]);
    ::close(go_pipe[1]);
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      ::_exit(100);
    auto listener = platform::install_notify_filter(spec);
    if (!listener)
      ::_exit(101);
    const int number = listener->get();
    char go = 0;
    if (::write(number_pipe[1], &number, sizeof number) != sizeof number ||
        ::read(go_pipe[0], &go, 1) != 1)
      ::_exit(102);
    ::_exit(body());
  }
  ::close(number_pipe[1]);
  ::close(go_pipe[0]);
  unique_fd number_in(number_pipe[0]);
  unique_fd go_out(go_pipe[1]);
  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  BOOST_REQUIRE(pidfd);
  int number = -1;
  BOOST_REQUIRE(::read(number_in.get(), &number, sizeof number) == sizeof number);
  unique_fd listener_fd(static_cast<int>(::syscall(SYS_pidfd_getfd, pidfd.get(), number, 0)));
  BOOST_REQUIRE(listener_fd);
  BOOST_REQUIRE(::write(go_out.get(), "g", 1) == 1);

  mediated_worker w;
  w.id = 1;
  w.pidfd = pidfd.get();
  w.listener = std::make_unique<platform::notify_listener>(std::move(listener_fd));
  syscall_mediator mediator(p);
  std::vector<mediation_result> results;
  // A thread of its own, as the event source's: the mediator changes this
  // thread's file-system ids, groups, umask and capabilities.
  std::thread decider([&] {
    for (;;) {
      pollfd fds[2] = {{w.listener->fd(), POLLIN, 0}, {w.pidfd, POLLIN, 0}};
      if (::poll(fds, 2, 30000) <= 0)
        return; // the child hangs: its status below says so
      if ((fds[0].revents & POLLIN) != 0) {
        if (auto r = mediator.handle(w))
          results.push_back(std::move(*r));
        continue;
      }
      if (fds[1].revents != 0 || fds[0].revents != 0)
        return; // the child ended, or its listener is gone
    }
  });
  decider.join();
  // The listener hangs up as the child exits, a moment before it can be
  // reaped: wait for the exit itself (bounded).
  pollfd exited{pidfd.get(), POLLIN, 0};
  if (::poll(&exited, 1, 30000) != 1) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
    BOOST_FAIL("the mediated child did not end");
  }
  BOOST_REQUIRE(::waitpid(pid, &status, 0) == pid);
  return results;
}

bool supported() {
  if (!platform::notify_supported()) {
    test::skip("this kernel has no seccomp user notification");
    return false;
  }
  if (::geteuid() != 0) {
    test::skip("the mediator acts as the worker through CAP_SETUID/CAP_SETGID: needs root");
    return false;
  }
  return true;
}

} // namespace

BOOST_AUTO_TEST_SUITE(syscall_mediator_tests)

BOOST_AUTO_TEST_CASE(a_denied_write_is_refused_and_an_allowed_one_gets_the_file) {
  if (!supported())
    return;
  scratch_dir dir;
  const std::string denied = dir.file("denied", "kept");
  const std::string allowed = dir.file("allowed");
  auto p = policy_with({deny_rule(denied, policy::fs_perm::write_file)});
  int status = 0;
  auto results = run_mediated(
      p,
      [&] {
        if (::open(denied.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC) >= 0)
          return 10;
        if (errno != EACCES)
          return 11;
        const int fd = ::open(allowed.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0)
          return 12;
        return ::write(fd, "ok", 2) == 2 ? 0 : 13;
      },
      status);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_REQUIRE(results.size() == 2u);
  BOOST_TEST((results[0].what == mediation_result::outcome::deny));
  BOOST_TEST(results[0].errno_value == EACCES);
  BOOST_TEST((results[0].event.kind == event_kind::syscall_denied));
  BOOST_TEST(results[0].event.target == denied);
  BOOST_TEST(results[0].event.rule == last_rule(*p));
  BOOST_TEST((results[1].what == mediation_result::outcome::allow));
  std::string content;
  std::getline(std::ifstream(denied), content);
  BOOST_TEST(content == "kept"); // no O_TRUNC reached it
  std::getline(std::ifstream(allowed), content);
  BOOST_TEST(content == "ok");
}

BOOST_AUTO_TEST_CASE(a_read_the_policy_denies_ends_the_caller_before_it_holds_the_file) {
  if (!supported())
    return;
  scratch_dir dir;
  const std::string secret = dir.file("secret", "secret");
  auto p = policy_with({deny_rule(secret, policy::fs_perm::read_file)});
  int status = 0;
  auto results = run_mediated(
      p,
      [&] {
        const int fd = ::open(secret.c_str(), O_RDONLY | O_CLOEXEC);
        return fd >= 0 ? 20 : 21; // never: the caller is killed first
      },
      status);
  BOOST_TEST(WIFSIGNALED(status));
  BOOST_TEST((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  BOOST_REQUIRE(results.size() == 1u);
  BOOST_TEST((results[0].what == mediation_result::outcome::kill));
  BOOST_TEST((results[0].event.kind == event_kind::optimistic_violation));
  BOOST_TEST((results[0].event.decision == event_decision::kill));
  BOOST_TEST(results[0].event.target == secret);
  BOOST_TEST(results[0].event.rule == last_rule(*p));
}

BOOST_AUTO_TEST_CASE(a_removal_is_performed_by_the_mediator_or_refused) {
  if (!supported())
    return;
  scratch_dir dir;
  const std::string kept = dir.file("kept");
  const std::string gone = dir.file("gone");
  auto p = policy_with({deny_rule(kept, policy::fs_perm::remove_file)});
  int status = 0;
  auto results = run_mediated(
      p,
      [&] {
        if (::unlink(kept.c_str()) == 0)
          return 30;
        if (errno != EACCES)
          return 31;
        return ::unlink(gone.c_str()) == 0 ? 0 : 32;
      },
      status);
  BOOST_TEST(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0);
  BOOST_REQUIRE(results.size() == 2u);
  BOOST_TEST((results[0].what == mediation_result::outcome::deny));
  BOOST_TEST(results[0].event.target == kept);
  BOOST_TEST((results[1].what == mediation_result::outcome::allow));
  struct stat st;
  BOOST_TEST(::stat(kept.c_str(), &st) == 0);
  BOOST_TEST(::stat(gone.c_str(), &st) != 0);
}

BOOST_AUTO_TEST_SUITE_END()
