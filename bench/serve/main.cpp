/// @file main.cpp
/// bench_serve [execs] [all|load|rss]: the real `castellan serve` daemon
/// (build/bin/castellan, started here on a unix socket with a shared-mode
/// pool of 4) under two kinds of use, each beside its baseline in the same
/// run:
///
/// - load: `POST /v1/exec` of `print(1)` latency, 4 clients, with 500
///   other connections open (300 idle kept-alive, 200 slowloris clients
///   sending their headers a byte at a time) against the same clients with
///   nothing else open, in alternating rounds;
/// - rss: the daemon's resident set idle, after a warm-up, and after
///   `execs` more execs of `pass` from 8 clients; the growth is counted
///   from the warmed-up figure (target: ≤ 5 %), in all and split into its
///   private memory (RssAnon) and the pages of the workers' segments it has
///   touched (RssShmem: the rings, which it touches a little further with
///   every exec until it has touched them all).

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "support/api_client.hpp"
#include "support/percentiles.hpp"

namespace {

using clock_type = std::chrono::steady_clock;
using castellan::bench::api_client;
using castellan::bench::samples;

/// The `castellan` binary beside this one (build/bin).
std::string castellan_binary() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0)
    return "castellan";
  std::string self(buf, static_cast<std::size_t>(n));
  return self.substr(0, self.rfind('/') + 1) + "castellan";
}

/// A `castellan serve` child on `socket`; stopped (SIGTERM) at the end.
class daemon_process {
public:
  explicit daemon_process(const std::string& socket) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0)
      std::abort();
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(fds[1], 1);
      const int null = ::open("/dev/null", O_WRONLY);
      ::dup2(null, 2);
      const std::string bin = castellan_binary();
      ::execl(bin.c_str(), bin.c_str(), "serve", "--listen", ("unix:" + socket).c_str(),
              "--mode", "shared", "--pool-size", "4", static_cast<char*>(nullptr));
      ::_exit(127);
    }
    ::close(fds[1]);
    // Its first line says it accepts connections.
    std::string line;
    char c;
    pollfd p{fds[0], POLLIN, 0};
    while (::poll(&p, 1, 60000) == 1 && ::read(fds[0], &c, 1) == 1 && c != '\n')
      line += c;
    ::close(fds[0]);
    ok_ = line.rfind("castellan: listening on", 0) == 0;
  }
  ~daemon_process() {
    ::kill(pid_, SIGTERM);
    ::waitpid(pid_, nullptr, 0);
  }
  daemon_process(const daemon_process&) = delete;
  daemon_process& operator=(const daemon_process&) = delete;

  bool ok() const { return ok_; }
  pid_t pid() const { return pid_; }

  /// A field of /proc/PID/status in KiB ("VmRSS", "RssAnon", "RssShmem").
  long status_kib(const std::string& field) const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/status");
    std::string line;
    while (std::getline(f, line))
      if (line.rfind(field + ":", 0) == 0)
        return std::atol(line.c_str() + field.size() + 1);
    return -1;
  }

  /// The size of its mappings of the workers' segments, in KiB: what the
  /// rings' pages can add to its resident set at most.
  long segments_kib() const {
    std::ifstream f("/proc/" + std::to_string(pid_) + "/maps");
    std::string line;
    long total = 0;
    while (std::getline(f, line)) {
      if (line.find("castellan-segment") == std::string::npos)
        continue;
      const auto dash = line.find('-');
      const auto space = line.find(' ');
      total += static_cast<long>((std::stoul(line.substr(dash + 1, space - dash - 1), nullptr, 16) -
                                  std::stoul(line.substr(0, dash), nullptr, 16)) /
                                 1024);
    }
    return total;
  }

private:
  pid_t pid_ = -1;
  bool ok_ = false;
};

struct row {
  samples latency;
  double seconds = 0;
  std::size_t errors = 0;
  std::size_t count() const { return latency.size(); }
};

/// `clients` kept-alive connections, `per_client` execs of `code` each.
void run_execs(const std::string& socket, int clients, int per_client, const std::string& code,
               row& out) {
  std::mutex m;
  std::vector<std::thread> threads;
  const auto t0 = clock_type::now();
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&] {
      samples mine;
      std::size_t errors = 0;
      api_client client(socket);
      for (int i = 0; i < per_client; ++i) {
        const auto t = clock_type::now();
        errors += !client.exec(code);
        mine.add(std::chrono::duration<double, std::micro>(clock_type::now() - t).count());
      }
      std::lock_guard<std::mutex> guard(m);
      out.latency.merge(mine);
      out.errors += errors;
    });
  for (auto& t : threads)
    t.join();
  out.seconds += std::chrono::duration<double>(clock_type::now() - t0).count();
}

int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::perror("bench: connect");
    std::exit(2);
  }
  return fd;
}

/// 300 idle kept-alive connections (each answered once) and 200 slowloris
/// ones, a byte of an endless header to each every 100 ms, while it lives.
class slow_crowd {
public:
  explicit slow_crowd(const std::string& socket) {
    const std::string health = "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n";
    for (int i = 0; i < 300; ++i) {
      idle_.push_back(connect_unix(socket));
      (void)!::write(idle_.back(), health.data(), health.size());
    }
    for (int i = 0; i < 200; ++i)
      loris_.push_back(connect_unix(socket));
    trickle_ = std::thread([this] {
      const std::string head = "POST /v1/exec HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
      for (std::size_t k = 0; !stop_; ++k) {
        const char c = k < head.size() ? head[k] : 'a';
        for (int fd : loris_)
          ::send(fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    });
  }
  ~slow_crowd() {
    stop_ = true;
    trickle_.join();
    for (int fd : idle_)
      ::close(fd);
    for (int fd : loris_)
      ::close(fd);
  }
  slow_crowd(const slow_crowd&) = delete;
  slow_crowd& operator=(const slow_crowd&) = delete;

private:
  std::vector<int> idle_;
  std::vector<int> loris_;
  std::atomic<bool> stop_{false};
  std::thread trickle_;
};

void print_row(const char* what, row& r) {
  std::printf("%-46s %8.1f %8.1f %10.0f %6zu\n", what, r.latency.percentile(0.5),
              r.latency.percentile(0.99), static_cast<double>(r.count()) / r.seconds, r.errors);
}

void bench_load(const std::string& socket, int execs) {
  // Rounds short enough to stay inside the daemon's 10 s read timeout, so
  // that every slow connection is open for all of its round.
  const int rounds = 5;
  const int clients = 4;
  const int per_client = std::max(1, execs / rounds / clients / 2);
  row warm_up;
  run_execs(socket, clients, 50, "print(1)", warm_up);
  row quiet;
  row loaded;
  for (int r = 0; r < rounds; ++r) {
    run_execs(socket, clients, per_client, "print(1)", quiet);
    slow_crowd crowd(socket);
    run_execs(socket, clients, per_client, "print(1)", loaded);
  }
  std::printf("\nexec latency beside 500 slow and idle connections, 4 clients, %d rounds\n",
              rounds);
  std::printf("%-46s %8s %8s %10s %6s\n", "", "p50 us", "p99 us", "execs/s", "errors");
  print_row("nothing else open", quiet);
  print_row("beside 300 idle + 200 slowloris connections", loaded);
}

/// The daemon's memory at one point, in KiB.
struct memory {
  long rss = 0;   ///< VmRSS
  long anon = 0;  ///< RssAnon: its private memory (heap, stacks)
  long shmem = 0; ///< RssShmem: the pages of the workers' segments it has touched
  static memory of(const daemon_process& d) {
    return {d.status_kib("VmRSS"), d.status_kib("RssAnon"), d.status_kib("RssShmem")};
  }
};

void print_memory(const char* what, const memory& m) {
  std::printf("%-38s %8ld %8ld %8ld\n", what, m.rss, m.anon, m.shmem);
}

double growth(long before, long after) {
  return 100.0 * static_cast<double>(after - before) / static_cast<double>(before);
}

void bench_rss(const daemon_process& d, const std::string& socket, int execs) {
  row first; // every worker up and used once
  run_execs(socket, 8, 4, "pass", first);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const memory idle = memory::of(d);
  // The warm-up fills what is bounded by a count of execs (the 4096
  // finished exec ids the supervisor and the pool remember for late
  // cancels, the telemetry windows).
  row warm;
  run_execs(socket, 8, std::max(1, std::min(execs / 10, 6000) / 8), "pass", warm);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const memory warmed = memory::of(d);
  row run;
  run_execs(socket, 8, execs / 8, "pass", run);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const memory after = memory::of(d);
  std::printf("\ndaemon memory, execs of 'pass' from 8 clients (%zu in %.1f s, %.0f/s, %zu errors)\n",
              run.count(), run.seconds, static_cast<double>(run.count()) / run.seconds,
              run.errors);
  std::printf("%-38s %8s %8s %8s\n", "KiB", "VmRSS", "RssAnon", "RssShmem");
  print_memory("idle, after 32 execs", idle);
  const std::string w = "after a warm-up of " + std::to_string(warm.count()) + " execs";
  print_memory(w.c_str(), warmed);
  const std::string a = "after " + std::to_string(run.count()) + " more execs";
  print_memory(a.c_str(), after);
  std::printf("%-38s %7.2f%% %7.2f%% %7.2f%%  (target: <= 5 %%)\n",
              "growth over the warmed-up figures", growth(warmed.rss, after.rss),
              growth(warmed.anon, after.anon), growth(warmed.shmem, after.shmem));
  std::printf("RssShmem is bounded by the segments' mappings: %ld KiB\n", d.segments_kib());
}

} // namespace

int main(int argc, char** argv) {
  const int execs = argc > 1 ? std::atoi(argv[1]) : 100000;
  const std::string what = argc > 2 ? argv[2] : "all";
  if (execs < 80 || (what != "all" && what != "load" && what != "rss")) {
    std::fprintf(stderr, "usage: bench_serve [execs >= 80] [all|load|rss]\n");
    return 2;
  }
  // The slow crowd's 500 fds.
  rlimit lim{};
  ::getrlimit(RLIMIT_NOFILE, &lim);
  if (lim.rlim_cur < 2048 && (lim.rlim_max == RLIM_INFINITY || lim.rlim_max >= 2048)) {
    lim.rlim_cur = 2048;
    ::setrlimit(RLIMIT_NOFILE, &lim);
  }
  char dir[] = "/tmp/castellan-bench-serve-XXXXXX";
  if (::mkdtemp(dir) == nullptr) {
    std::perror("bench: mkdtemp");
    return 2;
  }
  const std::string socket = std::string(dir) + "/api.sock";
  int rc = 0;
  {
    daemon_process d(socket);
    if (!d.ok()) {
      std::fprintf(stderr, "bench: castellan serve (%s) did not start\n",
                   castellan_binary().c_str());
      rc = 2;
    } else {
      std::printf("%u cores; castellan serve, shared-mode pool of 4, unix socket\n",
                  std::thread::hardware_concurrency());
      if (what == "all" || what == "load")
        bench_load(socket, std::min(execs, 20000));
      if (what == "all" || what == "rss")
        bench_rss(d, socket, execs);
    }
  }
  ::rmdir(dir);
  return rc;
}
