/// @file cli_test.cpp
/// castellan-worker's command line and inherited-fd validation: exit 2 with
/// a message that names the problem.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "worker_process.hpp"

using namespace castellan;
using namespace castellan::test;

namespace {

/// A segment and two doorbells for argument tests (all CLOEXEC here; the
/// spawn clears the flag on the fds it is told to keep).
struct wire_fds {
  wire_fds() {
    auto s = ipc::segment::create(4096);
    BOOST_REQUIRE(s.has_value());
    seg.emplace(std::move(*s));
    tw.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    ts.reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    BOOST_REQUIRE(tw.valid() && ts.valid());
  }
  std::vector<std::string> args(int seg_fd, int tw_fd, int ts_fd) const {
    return {"--segment-fd",       std::to_string(seg_fd), "--to-worker-fd", std::to_string(tw_fd),
            "--to-supervisor-fd", std::to_string(ts_fd),  "--harness",      harness_script()};
  }
  std::vector<std::string> args() const { return args(seg->fd(), tw.get(), ts.get()); }
  std::vector<int> fds() const { return {seg->fd(), tw.get(), ts.get()}; }

  std::optional<ipc::segment> seg;
  unique_fd tw;
  unique_fd ts;
};

} // namespace

BOOST_AUTO_TEST_SUITE(worker_cli)

BOOST_AUTO_TEST_CASE(no_arguments) {
  auto r = run_worker_cli({}, {});
  BOOST_TEST(r.exit.exited);
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(
      contains(r.err, "castellan-worker: --segment-fd is required\nusage: castellan-worker"));
}

BOOST_AUTO_TEST_CASE(help) {
  auto r = run_worker_cli({"--help"}, {});
  BOOST_TEST(r.exit.code == 0);
  BOOST_TEST(r.err == "");
}

BOOST_AUTO_TEST_CASE(unknown_argument) {
  wire_fds w;
  auto args = w.args();
  args.push_back("--bogus");
  auto r = run_worker_cli(args, w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "castellan-worker: unknown argument '--bogus'\n"));
}

BOOST_AUTO_TEST_CASE(missing_value_and_bad_numbers) {
  auto r = run_worker_cli({"--segment-fd"}, {});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--segment-fd needs a value"));
  r = run_worker_cli({"--segment-fd", "x7"}, {});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--segment-fd: 'x7' is not a file descriptor number"));
  r = run_worker_cli({"--to-worker-fd=1"}, {});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--to-worker-fd: fd 1 is one of stdin/stdout/stderr"));
  r = run_worker_cli({"--segment-fd", "99999999999"}, {});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "'99999999999' is out of range"));
}

BOOST_AUTO_TEST_CASE(same_fd_twice) {
  wire_fds w;
  auto r = run_worker_cli(w.args(w.seg->fd(), w.tw.get(), w.tw.get()), w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "must differ"));
}

BOOST_AUTO_TEST_CASE(bad_mode) {
  wire_fds w;
  auto args = w.args();
  args.insert(args.end(), {"--mode", "forever"});
  auto r = run_worker_cli(args, w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--mode: 'forever' is not one of reuse, fork, oneshot"));
}

BOOST_AUTO_TEST_CASE(fd_not_open) {
  wire_fds w;
  auto r = run_worker_cli(w.args(900, w.tw.get(), w.ts.get()), w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(
      contains(r.err, "castellan-worker: --segment-fd 900 is not open: Bad file descriptor\n"));
}

BOOST_AUTO_TEST_CASE(segment_not_a_segment) {
  wire_fds w;
  unique_fd fake{::memfd_create("fake", MFD_CLOEXEC)};
  BOOST_REQUIRE(::ftruncate(fake.get(), 4096 * 3) == 0);
  auto r = run_worker_cli(w.args(fake.get(), w.tw.get(), w.ts.get()),
                          {fake.get(), w.tw.get(), w.ts.get()});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--segment-fd " + std::to_string(fake.get()) +
                                 ": segment magic 0 is not 1280594755 (\"CSTL\")"));
}

BOOST_AUTO_TEST_CASE(doorbell_not_an_eventfd) {
  wire_fds w;
  int p[2];
  BOOST_REQUIRE(::pipe2(p, O_CLOEXEC | O_NONBLOCK) == 0);
  unique_fd a{p[0]};
  unique_fd b{p[1]};
  auto r =
      run_worker_cli(w.args(w.seg->fd(), a.get(), w.ts.get()), {w.seg->fd(), a.get(), w.ts.get()});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--to-worker-fd " + std::to_string(a.get()) + " is 'pipe:["));
  BOOST_TEST(contains(r.err, "not an eventfd"));
}

BOOST_AUTO_TEST_CASE(doorbell_blocking) {
  wire_fds w;
  unique_fd blocking{::eventfd(0, EFD_CLOEXEC)};
  auto r = run_worker_cli(w.args(w.seg->fd(), w.tw.get(), blocking.get()),
                          {w.seg->fd(), w.tw.get(), blocking.get()});
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--to-supervisor-fd " + std::to_string(blocking.get()) +
                                 " is blocking; the wire needs EFD_NONBLOCK eventfds"));
}

BOOST_AUTO_TEST_CASE(missing_interpreter_and_harness) {
  wire_fds w;
  auto args = w.args();
  args.insert(args.end(), {"--python", "/nonexistent/python3"});
  auto r = run_worker_cli(args, w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(
      r.err, "castellan-worker: --python /nonexistent/python3: No such file or directory\n"));
  args = w.args();
  args.back() = "/nonexistent/harness.py";
  r = run_worker_cli(args, w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--harness /nonexistent/harness.py: No such file or directory"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(worker_sandbox_cli)

BOOST_AUTO_TEST_CASE(an_unsealed_sandbox_spec_fails_closed_with_exit_3) {
  // A spec fd that is not a sealed memfd is refused before anything runs:
  // the worker never starts the harness without the sandbox it was asked for.
  wire_fds w;
  unique_fd spec{::memfd_create("not-sealed", MFD_CLOEXEC)};
  BOOST_REQUIRE(spec.valid());
  BOOST_REQUIRE(::write(spec.get(), "{}", 2) == 2);
  auto args = w.args();
  args.insert(args.end(), {"--sandbox-spec-fd", std::to_string(spec.get())});
  auto fds = w.fds();
  fds.push_back(spec.get());
  auto r = run_worker_cli(args, fds);
  BOOST_TEST(r.exit.exited);
  BOOST_TEST(r.exit.code == 3);
  BOOST_TEST(contains(r.err, "castellan-worker: sandbox: the sandbox spec could not be read: "),
             r.err);
}

BOOST_AUTO_TEST_CASE(the_sandbox_spec_fd_must_not_be_a_wire_fd) {
  wire_fds w;
  auto args = w.args();
  args.insert(args.end(), {"--sandbox-spec-fd", std::to_string(w.seg->fd())});
  auto r = run_worker_cli(args, w.fds());
  BOOST_TEST(r.exit.code == 2);
  BOOST_TEST(contains(r.err, "--sandbox-spec-fd must differ from the wire fds"));
}

BOOST_AUTO_TEST_SUITE_END()
