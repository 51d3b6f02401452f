/// @file worker_process.cpp
/// The test supervisor: spawn, frame I/O, exit handling.

#include "worker_process.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

namespace castellan::test {

namespace {

using clock = std::chrono::steady_clock;

std::string build_dir() {
  if (const char* dir = std::getenv("CASTELLAN_BUILD_DIR"); dir != nullptr && *dir != '\0')
    return dir;
  // Run by hand: the test binary lives in <build>/test-bin/.
  char exe[4096] = {};
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
  BOOST_REQUIRE_MESSAGE(n > 0, "set CASTELLAN_BUILD_DIR to the build directory");
  std::string path(exe, static_cast<std::size_t>(n));
  path.resize(path.rfind('/'));
  path.resize(path.rfind('/'));
  return path;
}

/// fork + exec `argv` with `keep_fds` inherited and stderr on `err_fd`.
pid_t spawn(const std::vector<std::string>& args, const std::vector<int>& keep_fds, int err_fd) {
  std::vector<char*> argv;
  for (const auto& a : args)
    argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const pid_t pid = ::fork();
  BOOST_REQUIRE(pid >= 0);
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    for (int fd : keep_fds)
      ::fcntl(fd, F_SETFD, 0);
    if (err_fd >= 0)
      ::dup2(err_fd, 2);
    ::execv(argv[0], argv.data());
    ::_exit(126);
  }
  return pid;
}

void read_available(int fd, std::string& out) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      return;
    out.append(buf, static_cast<std::size_t>(n));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

std::string worker_binary() {
  return build_dir() + "/bin/castellan-worker";
}

std::string harness_script() {
  return build_dir() + "/share/castellan/python/castellan_harness.py";
}

exit_info wait_for_exit(pid_t pid, std::chrono::milliseconds timeout) {
  // The child's exit makes its pidfd readable: wait on that event, then reap.
  if (!wait_until_exited(pid, timeout))
    return {};
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid, &status, 0);
    if (r == pid) {
      if (WIFEXITED(status))
        return {true, WEXITSTATUS(status)};
      if (WIFSIGNALED(status))
        return {true, 128 + WTERMSIG(status)};
      return {true, -1};
    }
    if (r < 0 && errno != EINTR)
      return {};
  }
}

cli_run run_worker_cli(const std::vector<std::string>& args, const std::vector<int>& keep_fds,
                       std::chrono::milliseconds timeout) {
  int p[2];
  BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  unique_fd read_end{p[0]};
  unique_fd write_end{p[1]};
  std::vector<std::string> argv{worker_binary()};
  argv.insert(argv.end(), args.begin(), args.end());
  const pid_t pid = spawn(argv, keep_fds, write_end.get());
  write_end.reset();
  cli_run run;
  run.exit = wait_for_exit(pid, timeout);
  if (!run.exit.exited) {
    ::kill(pid, SIGKILL);
    wait_for_exit(pid, 5s);
  }
  ::fcntl(read_end.get(), F_SETFL, O_NONBLOCK);
  read_available(read_end.get(), run.err);
  return run;
}

worker_process::worker_process(std::vector<std::string> extra_args, uint32_t capacity) {
  auto seg = ipc::segment::create(capacity);
  BOOST_REQUIRE_MESSAGE(seg.has_value(), (seg ? std::string() : seg.error().describe()));
  seg_.emplace(std::move(*seg));
  auto tw = ipc::doorbell::create();
  auto ts = ipc::doorbell::create();
  BOOST_REQUIRE(tw.has_value() && ts.has_value());
  to_worker_.emplace(std::move(*tw));
  to_supervisor_.emplace(std::move(*ts));
  writer_.emplace(*seg_, ipc::direction::to_worker);
  reader_.emplace(*seg_, ipc::direction::to_supervisor);

  int p[2];
  BOOST_REQUIRE(::pipe2(p, O_CLOEXEC) == 0);
  stderr_.reset(p[0]);
  unique_fd err_write{p[1]};
  ::fcntl(stderr_.get(), F_SETFL, O_NONBLOCK);

  std::vector<std::string> args{worker_binary(),
                                "--segment-fd",
                                std::to_string(seg_->fd()),
                                "--to-worker-fd",
                                std::to_string(to_worker_->fd()),
                                "--to-supervisor-fd",
                                std::to_string(to_supervisor_->fd()),
                                "--python",
                                "/usr/bin/python3",
                                "--harness",
                                harness_script()};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  pid_ = spawn(args, {seg_->fd(), to_worker_->fd(), to_supervisor_->fd()}, err_write.get());

  auto ready = next_frame(30s);
  BOOST_REQUIRE_MESSAGE(ready.has_value(), "no READY from the worker; stderr: " + diagnostics());
  BOOST_REQUIRE(ready->type == ipc::message_type::ready);
  BOOST_REQUIRE(ready->request_id == 0u);
  ready_ = nlohmann::json::parse(ready->payload, nullptr, false);
  BOOST_REQUIRE_MESSAGE(!ready_.is_discarded(), "READY is not JSON: " + ready->payload);
}

worker_process::~worker_process() {
  if (pid_ > 0 && !exit_.exited) {
    ::kill(pid_, SIGKILL);
    wait_for_exit(pid_, 10s);
  }
}

bool worker_process::poll_exit() {
  if (exit_.exited)
    return true;
  int status = 0;
  if (::waitpid(pid_, &status, WNOHANG) == pid_) {
    exit_.exited = true;
    exit_.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  return exit_.exited;
}

exit_info worker_process::wait_exit(std::chrono::milliseconds timeout) {
  if (!exit_.exited)
    exit_ = wait_for_exit(pid_, timeout);
  return exit_;
}

std::string worker_process::diagnostics() {
  read_available(stderr_.get(), diagnostics_);
  return diagnostics_;
}

void worker_process::send(ipc::message_type type, uint32_t request_id, std::string_view payload) {
  // The worker frees ring space without telling this side: poll, with a
  // 30 s safety net.
  const auto deadline = clock::now() + 30s;
  for (;;) {
    const auto st = writer_->write(type, request_id, payload);
    if (st == ipc::ring_status::ok)
      break;
    BOOST_REQUIRE_MESSAGE(st == ipc::ring_status::full, "to_worker ring is corrupt");
    BOOST_REQUIRE_MESSAGE(clock::now() < deadline, "to_worker ring stayed full for 30 s");
    std::this_thread::sleep_for(1ms);
  }
  BOOST_REQUIRE(to_worker_->ring().has_value());
}

void worker_process::send_raw(std::string_view bytes) {
  uint32_t* tail_word = seg_->tail_word(ipc::direction::to_worker);
  const uint32_t tail = __atomic_load_n(tail_word, __ATOMIC_RELAXED);
  std::byte* data = seg_->data(ipc::direction::to_worker);
  for (std::size_t i = 0; i < bytes.size(); ++i)
    data[(tail + i) & (seg_->capacity() - 1)] = static_cast<std::byte>(bytes[i]);
  __atomic_store_n(tail_word, tail + static_cast<uint32_t>(bytes.size()), __ATOMIC_RELEASE);
  BOOST_REQUIRE(to_worker_->ring().has_value());
}

std::optional<ipc::frame> worker_process::next_frame(std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    auto r = reader_->read();
    if (r.status == ipc::ring_status::ok) {
      // Space was freed: a harness waiting for it may go on.
      (void)to_worker_->ring();
      return std::move(r.value);
    }
    BOOST_REQUIRE_MESSAGE(r.status == ipc::ring_status::empty,
                          "to_supervisor ring is corrupt: " + r.error);
    const auto now = clock::now();
    if (now >= deadline)
      return std::nullopt;
    // Exited and nothing left to read: no frame will come.
    if (poll_exit() && reader_->used_bytes() == 0)
      return std::nullopt;
    const auto wait = std::min<std::chrono::milliseconds>(
        100ms, std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now) + 1ms);
    pollfd p{to_supervisor_->fd(), POLLIN, 0};
    ::poll(&p, 1, static_cast<int>(wait.count()));
    to_supervisor_->drain();
  }
}

exec_output worker_process::run(ipc::message_type type, uint32_t request_id,
                                std::string_view payload, std::chrono::milliseconds timeout) {
  send(type, request_id, payload);
  exec_output out;
  const auto deadline = clock::now() + timeout;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
    auto f = next_frame(std::max(left, 0ms));
    if (!f) {
      out.problem = "no RESULT within the timeout; worker stderr: " + diagnostics();
      return out;
    }
    if (f->request_id != request_id) {
      out.problem = "frame for request " + std::to_string(f->request_id);
      return out;
    }
    switch (f->type) {
    case ipc::message_type::stdout_data:
      out.out += f->payload;
      break;
    case ipc::message_type::stderr_data:
      out.err += f->payload;
      break;
    case ipc::message_type::result:
      out.result = nlohmann::json::parse(f->payload, nullptr, false);
      out.complete = !out.result.is_discarded();
      if (!out.complete)
        out.problem = "RESULT is not JSON: " + f->payload;
      return out;
    default:
      out.problem = "unexpected frame " + std::string(ipc::to_string(f->type));
      return out;
    }
  }
}

exec_output worker_process::run_code(std::string_view code, std::chrono::milliseconds timeout) {
  return run(ipc::message_type::code, next_request_id_++, code, timeout);
}

bool process_exists(pid_t pid) {
  return ::access(("/proc/" + std::to_string(pid)).c_str(), F_OK) == 0;
}

namespace {
/// Fields after the ")" that ends the command name in /proc/<pid>/stat.
std::string stat_tail(pid_t pid) {
  const std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  const auto close = stat.rfind(')');
  return close == std::string::npos ? std::string() : stat.substr(close + 2);
}
} // namespace

char process_state(pid_t pid) {
  const std::string tail = stat_tail(pid);
  return tail.empty() ? '\0' : tail[0];
}

bool wait_until_exited(pid_t pid, std::chrono::milliseconds timeout) {
  const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0)
    return errno == ESRCH; // gone (reaped) already
  const auto deadline = clock::now() + timeout;
  bool exited = false;
  for (;;) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    pollfd p{fd, POLLIN, 0};
    const int n = ::poll(&p, 1, static_cast<int>(std::max<long long>(left, 0)));
    if (n == 1) {
      exited = true;
      break;
    }
    if (n == 0 || errno != EINTR)
      break;
  }
  ::close(fd);
  return exited;
}

bool wait_until_in_syscall(pid_t pid, long nr, std::chrono::milliseconds timeout) {
  const auto deadline = clock::now() + timeout;
  for (;;) {
    // "<nr> <args…>" while blocked in a call, "running" otherwise.
    std::ifstream in("/proc/" + std::to_string(pid) + "/syscall");
    long current = -1;
    if (in >> current && current == nr)
      return true;
    if (clock::now() >= deadline)
      return false;
    std::this_thread::sleep_for(1ms);
  }
}

pid_t parent_of(pid_t pid) {
  std::istringstream in(stat_tail(pid));
  char state = 0;
  pid_t ppid = -1;
  in >> state >> ppid;
  return in ? ppid : -1;
}

} // namespace castellan::test
