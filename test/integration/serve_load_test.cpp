// `castellan serve` under 500 connections at once: idle kept-alive ones,
// slowloris clients that send their headers a byte at a time and never
// finish, and clients that pipeline requests and read the answers a byte at
// a time. Meanwhile execs from other connections are answered correctly;
// the slow clients are cut off by the read timeout, and the daemon answers
// afterwards. The exec latencies with and without the load are printed (a
// figure, not a check: bench/README.md has the measured ones).

#include <boost/test/unit_test.hpp>

#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <future>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/http_client.hpp"
#include "support/serve_process.hpp"

using castellan::test::http_client;
using castellan::test::http_reply;
using castellan::test::serve_process;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr int idle_clients = 300;
constexpr int slowloris_clients = 150;
constexpr int slow_readers = 50;
constexpr int total_slow = idle_clients + slowloris_clients + slow_readers;
/// The daemon's read timeout here: long enough for the execs under load to
/// run inside it on a busy 2-core machine, short enough for a lean test.
constexpr int read_timeout_ms = 4000;
/// Pipelined health checks per slow reader: their answers fill the socket's
/// buffer many times over, so the server's write blocks on the reader.
constexpr int pipelined = 1500;

/// Room for this test's own fds (a login's soft limit is often 1024).
void raise_own_fd_limit() {
  rlimit lim{};
  BOOST_REQUIRE(::getrlimit(RLIMIT_NOFILE, &lim) == 0);
  const rlim_t want = 2048;
  if (lim.rlim_cur != RLIM_INFINITY && lim.rlim_cur < want) {
    lim.rlim_cur = lim.rlim_max == RLIM_INFINITY ? want : std::min(want, lim.rlim_max);
    BOOST_REQUIRE(::setrlimit(RLIMIT_NOFILE, &lim) == 0);
  }
  BOOST_REQUIRE_MESSAGE(lim.rlim_cur == RLIM_INFINITY || lim.rlim_cur >= want,
                        "RLIMIT_NOFILE hard limit " << lim.rlim_max << " below " << want);
}

/// A blocking connection to `path`, with a 30 s safety net on every read.
int connect_unix(const std::string& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  BOOST_REQUIRE_MESSAGE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0,
                        "connect: " << std::strerror(errno));
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  return fd;
}

void send_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::send(fd, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
    BOOST_REQUIRE_MESSAGE(n > 0, "send: " << std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

/// Reads one whole answer to a GET (headers and Content-Length body).
std::string read_answer(int fd) {
  std::string in;
  char buf[4096];
  for (;;) {
    const auto end = in.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto cl = in.find("Content-Length: ");
      BOOST_REQUIRE(cl != std::string::npos && cl < end);
      const std::size_t len = std::stoul(in.substr(cl + 16));
      if (in.size() >= end + 4 + len)
        return in;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    BOOST_REQUIRE_MESSAGE(n > 0, "no whole answer: " << in);
    in.append(buf, static_cast<std::size_t>(n));
  }
}

/// Reads what is left until the server closes (EOF or reset); the bytes
/// read. Fails on the 30 s safety net: the server never closed.
std::size_t read_until_closed(int fd) {
  std::size_t total = 0;
  char buf[65536];
  for (;;) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n > 0) {
      total += static_cast<std::size_t>(n);
      continue;
    }
    BOOST_REQUIRE_MESSAGE(n == 0 || errno == ECONNRESET,
                          "the server did not close the connection: " << std::strerror(errno));
    return total;
  }
}

struct latencies {
  std::vector<double> us;
  double percentile(double p) {
    if (us.empty())
      return 0;
    std::sort(us.begin(), us.end());
    return us[std::min(us.size() - 1, static_cast<std::size_t>(p * static_cast<double>(us.size())))];
  }
};

/// `clients` connections, `per_client` execs each of `print(N)`, every
/// answer checked; the latencies.
latencies run_execs(const std::string& socket, int clients, int per_client) {
  std::vector<std::future<std::vector<double>>> runs;
  for (int c = 0; c < clients; ++c)
    runs.push_back(std::async(std::launch::async, [&socket, c, per_client] {
      std::vector<double> mine;
      http_client client(socket);
      for (int i = 0; i < per_client; ++i) {
        const int n = c * 100000 + i;
        const auto t0 = clock_type::now();
        auto r = client.post("/v1/exec", {{"code", "print(" + std::to_string(n) + ")"}});
        mine.push_back(std::chrono::duration<double, std::micro>(clock_type::now() - t0).count());
        BOOST_REQUIRE_MESSAGE(r.status == 200u, r.status << " " << r.body);
        auto j = r.json();
        BOOST_REQUIRE_MESSAGE(j["error_class"] == "ok", r.body);
        BOOST_REQUIRE_EQUAL(j["stdout"].get<std::string>(), std::to_string(n) + "\n");
      }
      return mine;
    }));
  latencies out;
  for (auto& r : runs) {
    auto v = r.get();
    out.us.insert(out.us.end(), v.begin(), v.end());
  }
  return out;
}

uint64_t open_connections(const std::string& socket) {
  http_client c(socket);
  auto r = c.get("/v1/status");
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.body);
  return r.json()["connections"].get<uint64_t>();
}

} // namespace

BOOST_AUTO_TEST_SUITE(cli_serve_load)

BOOST_AUTO_TEST_CASE(five_hundred_connections_with_slow_clients_leave_execs_answered) {
  raise_own_fd_limit();
  serve_process serve(
      {"--mode", "shared", "--read-timeout-ms", std::to_string(read_timeout_ms)});
  serve.first_line();
  const std::string& sock = serve.socket_path;

  run_execs(sock, 4, 10); // warm-up
  auto quiet = run_execs(sock, 4, 40);

  // The slow and idle clients, all connected at once.
  std::vector<int> idle;
  std::vector<int> loris;
  std::vector<int> readers;
  for (int i = 0; i < idle_clients; ++i) {
    idle.push_back(connect_unix(sock));
    send_all(idle.back(), "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n");
  }
  std::size_t one_answer = 0; // the bytes of one health answer
  for (int fd : idle) {
    auto a = read_answer(fd);
    BOOST_REQUIRE_MESSAGE(a.rfind("HTTP/1.1 200 ", 0) == 0, a);
    one_answer = a.size();
  }
  std::string pipeline;
  for (int i = 0; i < pipelined; ++i)
    pipeline += "GET /v1/health HTTP/1.1\r\nHost: localhost\r\n\r\n";
  for (int i = 0; i < slow_readers; ++i) {
    readers.push_back(connect_unix(sock));
    // Beyond the server's read-ahead it stops reading: only a part of this
    // goes in at once, the rest as the reader takes answers.
    const int fd = readers.back();
    timeval tv{0, 200000};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ::send(fd, pipeline.data(), pipeline.size(), MSG_NOSIGNAL);
  }
  for (int i = 0; i < slowloris_clients; ++i)
    loris.push_back(connect_unix(sock));
  // Slowloris: one byte of an endless header per connection every 100 ms;
  // slow readers: one byte of their answers every 100 ms.
  std::atomic<bool> stop{false};
  std::thread trickle([&] {
    const std::string head = "POST /v1/exec HTTP/1.1\r\nHost: localhost\r\nX-Slow: ";
    for (std::size_t k = 0; !stop; ++k) {
      const char c = k < head.size() ? head[k] : 'a';
      for (int fd : loris)
        ::send(fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT);
      char b;
      for (int fd : readers)
        ::recv(fd, &b, 1, MSG_DONTWAIT);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });

  const uint64_t held = open_connections(sock);
  BOOST_TEST_MESSAGE("connections open under load: " << held);
  BOOST_TEST(held >= static_cast<uint64_t>(total_slow + 1));
  const auto loaded_t0 = clock_type::now();
  auto loaded = run_execs(sock, 4, 40);
  const double loaded_ms =
      std::chrono::duration<double, std::milli>(clock_type::now() - loaded_t0).count();
  const uint64_t after_execs = open_connections(sock);
  BOOST_TEST_MESSAGE("connections open after the execs (" << loaded_ms << " ms): " << after_execs);
  std::printf("execs of print(N), 4 clients x 40, shared pool of 2\n"
              "                                   p50 us   p99 us\n"
              "quiet                            %8.0f %8.0f\n"
              "beside %d slow/idle connections %8.0f %8.0f\n",
              quiet.percentile(0.5), quiet.percentile(0.99), total_slow,
              loaded.percentile(0.5), loaded.percentile(0.99));
  std::fflush(stdout);

  // The read timeout cuts every one of them off: the idle ones after their
  // keep-alive wait, the slowloris ones before their headers end, the slow
  // readers before they got all their answers.
  const auto deadline = clock_type::now() + std::chrono::seconds(30);
  while (open_connections(sock) > 1) {
    BOOST_REQUIRE_MESSAGE(clock_type::now() < deadline,
                          "still open: " << open_connections(sock) << " connections");
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  stop = true;
  trickle.join();
  for (int fd : idle)
    BOOST_TEST(read_until_closed(fd) == 0u);
  for (int fd : loris) {
    // Nothing was answered: the request never ended.
    BOOST_TEST(read_until_closed(fd) == 0u);
  }
  std::size_t most = 0;
  for (int fd : readers)
    most = std::max(most, read_until_closed(fd));
  BOOST_TEST(most < one_answer * pipelined, "a slow reader got every answer: " << most);
  for (auto* v : {&idle, &loris, &readers})
    for (int fd : *v)
      ::close(fd);

  // Still up, and serving.
  http_client c(sock);
  auto health = c.get("/v1/health");
  BOOST_TEST(health.status == 200u);
  BOOST_TEST(health.json()["status"] == "ok");
  run_execs(sock, 2, 5);
  BOOST_TEST(::kill(serve.pid, 0) == 0);
}

BOOST_AUTO_TEST_SUITE_END()
