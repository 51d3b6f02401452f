/// @file main.cpp
/// bench_proxy: the egress proxy against direct loopback connections, in the
/// same run, on the same servers.
///
///   bulk   one TCP stream of `mib` MiB from a server on 127.0.0.2, read to
///          EOF: direct, and through a CONNECT tunnel (MB/s, median of rounds)
///   small  keep-alive HTTP requests with a small response: direct, and as
///          absolute-URI requests through the proxy (requests/s, p50, p99)
///
/// The proxy is the real engine (actors/proxy/egress_proxy) fed the way
/// castellan-worker feeds it: each connection is accepted on loopback and
/// its socket passed over an AF_UNIX socket pair with SCM_RIGHTS; only the
/// network namespace is missing.
///
/// Usage: bench_proxy [bulk MiB (default 512)] [small requests per client (default 20000)]

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "actors/proxy/egress_proxy.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/fd_passing.hpp"
#include "support/percentiles.hpp"

namespace {

using namespace castellan;
using clock_type = std::chrono::steady_clock;

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "bench_proxy: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

unique_fd listen_on(const char* address, uint16_t& port) {
  unique_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &a.sin_addr);
  if (!s || ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::listen(s.get(), 256) != 0)
    die("listen");
  socklen_t len = sizeof a;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return s;
}

unique_fd connect_to(const char* address, uint16_t port) {
  unique_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &a.sin_addr);
  if (!s || ::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0)
    die("connect");
  const int one = 1;
  ::setsockopt(s.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

void write_all(int fd, const char* p, std::size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w <= 0)
      return;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
}

/// Reads one response head plus a Content-Length body (the benchmark's own
/// servers and the proxy both send one); returns false at EOF.
bool read_response(int fd, std::string& buf) {
  for (;;) {
    const auto end = buf.find("\r\n\r\n");
    if (end != std::string::npos) {
      const auto cl = buf.find("Content-Length: ");
      const std::size_t body = cl != std::string::npos && cl < end
                                 ? std::strtoul(buf.c_str() + cl + 16, nullptr, 10)
                                 : 0;
      if (buf.size() >= end + 4 + body) {
        buf.erase(0, end + 4 + body);
        return true;
      }
    }
    char tmp[16384];
    const ssize_t n = ::read(fd, tmp, sizeof tmp);
    if (n <= 0)
      return false;
    buf.append(tmp, static_cast<std::size_t>(n));
  }
}

/// Server: every accepted connection gets `bytes` bytes, then EOF.
class bulk_server {
public:
  explicit bulk_server(std::size_t bytes) : bytes_(bytes) {
    listener_ = listen_on("127.0.0.2", port_);
    thread_ = std::thread([this] {
      std::vector<char> chunk(1 << 20, 'x');
      for (;;) {
        unique_fd c{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
        if (!c || stop_)
          return;
        for (std::size_t sent = 0; sent < bytes_;) {
          const ssize_t n = ::send(c.get(), chunk.data(),
                                   std::min(chunk.size(), bytes_ - sent), MSG_NOSIGNAL);
          if (n <= 0)
            break;
          sent += static_cast<std::size_t>(n);
        }
      }
    });
  }
  ~bulk_server() {
    stop_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }

private:
  std::size_t bytes_;
  unique_fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// Server: answers every request head on a keep-alive connection with a
/// small fixed response (a thread per connection).
class small_server {
public:
  small_server() {
    listener_ = listen_on("127.0.0.2", port_);
    thread_ = std::thread([this] {
      std::vector<std::thread> conns;
      for (;;) {
        const int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
        if (fd < 0 || stop_) {
          if (fd >= 0)
            ::close(fd);
          break;
        }
        conns.emplace_back([fd] {
          unique_fd c{fd};
          const int one = 1;
          ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          static const char response[] =
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nhello, proxy\n";
          std::string buf;
          char tmp[16384];
          for (;;) {
            std::size_t end;
            while ((end = buf.find("\r\n\r\n")) != std::string::npos) {
              buf.erase(0, end + 4);
              write_all(fd, response, sizeof response - 1);
            }
            const ssize_t n = ::read(fd, tmp, sizeof tmp);
            if (n <= 0)
              return;
            buf.append(tmp, static_cast<std::size_t>(n));
          }
        });
      }
      for (auto& t : conns)
        t.join();
    });
  }
  ~small_server() {
    stop_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }

private:
  unique_fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

/// The proxy with one worker link, fed like castellan-worker feeds it.
class proxied {
public:
  proxied() {
    auto doc = policy::parse_policy(R"({"version": 1, "defaults": {"net": "deny"},
      "net": {"rules": [{"action": "allow", "proto": "tcp", "cidr": "127.0.0.2/32",
                         "ports": "1024-65535"}]}})",
                                    "<bench>");
    if (!doc)
      die("policy");
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
      die("socketpair");
    worker_end_.reset(pair[0]);
    proxy::egress_limits limits;
    limits.bytes_per_exec = 0;
    limits.connections_per_worker = 1024;
    engine_ = std::make_unique<proxy::egress_proxy>(limits, nullptr);
    engine_->attach("bench", 1, unique_fd{pair[1]},
                    policy::compiled_policy::compile(std::move(*doc), "bench"),
                    std::make_shared<std::atomic<uint64_t>>(1));
    listener_ = listen_on("127.0.0.1", port_);
  }

  /// A client connection whose other end the proxy serves.
  unique_fd connect() {
    unique_fd client = connect_to("127.0.0.1", port_);
    unique_fd accepted{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    if (!accepted || !platform::send_fd(worker_end_.get(), accepted.get()))
      die("pass fd");
    return client;
  }

private:
  unique_fd worker_end_;
  unique_fd listener_;
  uint16_t port_ = 0;
  std::unique_ptr<proxy::egress_proxy> engine_;
};

double drain(int fd) {
  std::vector<char> buf(1 << 20);
  std::size_t total = 0;
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n <= 0)
      break;
    total += static_cast<std::size_t>(n);
  }
  return static_cast<double>(total);
}

/// MB/s of one bulk transfer.
double bulk_direct(const bulk_server& s) {
  const auto t0 = clock_type::now();
  auto c = connect_to("127.0.0.2", s.port());
  const double bytes = drain(c.get());
  return bytes / 1e6 / std::chrono::duration<double>(clock_type::now() - t0).count();
}

double bulk_proxied(const bulk_server& s, proxied& p) {
  const auto t0 = clock_type::now();
  auto c = p.connect();
  const std::string req = "CONNECT 127.0.0.2:" + std::to_string(s.port()) + " HTTP/1.1\r\n\r\n";
  write_all(c.get(), req.data(), req.size());
  // The 200 line is 39 bytes; everything after it is payload.
  const double bytes = drain(c.get()) - 39.0;
  return bytes / 1e6 / std::chrono::duration<double>(clock_type::now() - t0).count();
}

struct rate_result {
  double per_second = 0;
  double p50_us = 0;
  double p99_us = 0;
};

/// `clients` threads, each sending `n` keep-alive requests one after another.
rate_result small_requests(int clients, int n, const std::function<unique_fd()>& open,
                           const std::string& request) {
  std::vector<bench::samples> lat(static_cast<std::size_t>(clients));
  std::vector<std::thread> threads;
  std::atomic<int> failures{0};
  const auto t0 = clock_type::now();
  for (int i = 0; i < clients; ++i) {
    threads.emplace_back([&, i] {
      auto c = open();
      std::string buf;
      for (int k = 0; k < n; ++k) {
        const auto s = clock_type::now();
        write_all(c.get(), request.data(), request.size());
        if (!read_response(c.get(), buf)) {
          ++failures;
          return;
        }
        lat[static_cast<std::size_t>(i)].add(
          std::chrono::duration<double, std::micro>(clock_type::now() - s).count());
      }
    });
  }
  for (auto& t : threads)
    t.join();
  const double seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
  if (failures != 0)
    std::fprintf(stderr, "bench_proxy: %d clients failed\n", failures.load());
  bench::samples all;
  for (auto& l : lat)
    all.merge(l);
  rate_result r;
  r.per_second = static_cast<double>(all.size()) / seconds;
  r.p50_us = all.percentile(0.5);
  r.p99_us = all.percentile(0.99);
  return r;
}

} // namespace

int main(int argc, char** argv) {
  const std::size_t mib = argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512;
  const int per_client = argc > 2 ? std::atoi(argv[2]) : 20000;
  const int rounds = 5;
  proxied proxy;

  {
    bulk_server server(mib << 20);
    bench::samples direct, through;
    for (int r = 0; r < rounds; ++r) {
      // Alternate so that machine noise hits both alike.
      direct.add(bulk_direct(server));
      through.add(bulk_proxied(server, proxy));
    }
    const double d = direct.percentile(0.5), t = through.percentile(0.5);
    std::printf("bulk transfer, %zu MiB per stream, median of %d rounds, %u cores\n", mib, rounds,
                std::thread::hardware_concurrency());
    std::printf("%-44s %10.0f MB/s\n", "direct loopback connection", d);
    std::printf("%-44s %10.0f MB/s   (%.0f %% of direct)\n", "through the proxy (CONNECT tunnel)", t,
                100.0 * t / d);
  }

  {
    small_server server;
    const std::string port = std::to_string(server.port());
    const std::string origin_form = "GET /small HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n";
    const std::string absolute = "GET http://127.0.0.2:" + port +
                                 "/small HTTP/1.1\r\nHost: 127.0.0.2\r\n\r\n";
    std::printf("\nsmall requests, keep-alive, %d per client\n", per_client);
    std::printf("%-44s %10s %9s %9s\n", "", "req/s", "p50 us", "p99 us");
    for (int clients : {1, 4}) {
      auto d = small_requests(clients, per_client,
                              [&] { return connect_to("127.0.0.2", server.port()); }, origin_form);
      auto t = small_requests(clients, per_client, [&] { return proxy.connect(); }, absolute);
      const std::string dl = "direct, " + std::to_string(clients) + " client(s)";
      const std::string tl = "through the proxy, " + std::to_string(clients) + " client(s)";
      std::printf("%-44s %10.0f %9.1f %9.1f\n", dl.c_str(), d.per_second, d.p50_us, d.p99_us);
      std::printf("%-44s %10.0f %9.1f %9.1f   (%.0f %% of direct)\n", tl.c_str(), t.per_second,
                  t.p50_us, t.p99_us, 100.0 * t.per_second / d.per_second);
    }
  }
  return 0;
}
