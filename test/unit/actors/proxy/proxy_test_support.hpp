#pragma once

/// @file proxy_test_support.hpp
/// Helpers of the egress proxy tests: policies from text, loopback sockets,
/// and a worker stand-in that hands TCP connections to the proxy the way
/// castellan-worker does (SCM_RIGHTS over an AF_UNIX socket pair).

#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_parser.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/fd_passing.hpp"

namespace castellan::proxy::test {

inline std::shared_ptr<const policy::compiled_policy> policy_from(std::string_view text) {
  auto doc = policy::parse_policy(text, "<test>");
  BOOST_REQUIRE_MESSAGE(doc.has_value(), "test policy invalid");
  return policy::compiled_policy::compile(std::move(*doc), "test");
}

/// A listening TCP socket on `address`:0 (blocking).
inline unique_fd listen_on(const char* address, uint16_t& port) {
  unique_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  BOOST_REQUIRE(s);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, address, &a.sin_addr);
  BOOST_REQUIRE(::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  BOOST_REQUIRE(::listen(s.get(), 64) == 0);
  socklen_t len = sizeof a;
  ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return s;
}

inline unique_fd connect_to(const char* address, uint16_t port) {
  unique_fd s{::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
  BOOST_REQUIRE(s);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, address, &a.sin_addr);
  BOOST_REQUIRE_MESSAGE(::connect(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0,
                        "connect " << address << ":" << port << ": " << std::strerror(errno));
  return s;
}

/// Reads until `fd` reaches EOF, `limit` bytes or `timeout`; returns what came.
inline std::string read_all(int fd, std::size_t limit = 1 << 20,
                            std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  std::string out;
  const auto end = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  while (out.size() < limit) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
      end - std::chrono::steady_clock::now());
    if (left.count() <= 0)
      break;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) <= 0)
      break;
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  return out;
}

/// Reads up to and including the first "\r\n\r\n" (a response head).
inline std::string read_head(int fd) {
  std::string out;
  char c;
  while (out.size() < 65536 && ::read(fd, &c, 1) == 1) {
    out.push_back(c);
    if (out.size() >= 4 && out.compare(out.size() - 4, 4, "\r\n\r\n") == 0)
      break;
  }
  return out;
}

inline void write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    BOOST_REQUIRE_MESSAGE(n > 0, "write: " << std::strerror(errno));
    data.remove_prefix(static_cast<std::size_t>(n));
  }
}

/// The worker side of one worker's egress link: each connect() makes a TCP
/// connection on loopback and passes the accepted end to the proxy, as
/// castellan-worker's relay does; the caller keeps the client end.
class fake_worker {
public:
  fake_worker() {
    int pair[2];
    BOOST_REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) == 0);
    worker_end_.reset(pair[0]);
    proxy_end_.reset(pair[1]);
    listener_ = listen_on("127.0.0.1", port_);
  }

  /// The end to attach to the proxy (taken once).
  unique_fd take_proxy_end() { return std::move(proxy_end_); }

  unique_fd connect() {
    unique_fd client = connect_to("127.0.0.1", port_);
    unique_fd accepted{::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    BOOST_REQUIRE(accepted);
    BOOST_REQUIRE(platform::send_fd(worker_end_.get(), accepted.get()));
    return client;
  }

  void close_link() { worker_end_.reset(); }

  std::shared_ptr<std::atomic<uint64_t>> exec = std::make_shared<std::atomic<uint64_t>>(7);

private:
  unique_fd worker_end_;
  unique_fd proxy_end_;
  unique_fd listener_;
  uint16_t port_ = 0;
};

} // namespace castellan::proxy::test
