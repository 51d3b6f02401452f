#include <boost/test/unit_test.hpp>

#include <sys/socket.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/proxy/egress_proxy.hpp"
#include "proxy_test_support.hpp"

using namespace castellan;
using namespace castellan::proxy::test;

namespace {

/// The test servers listen on 127.0.0.2 (loopback, so only an explicit rule
/// opens it); 127.0.0.1 stays refused.
constexpr const char* test_policy = R"({
  "version": 1,
  "defaults": { "net": "deny" },
  "net": {
    "rules": [ { "action": "allow", "proto": "tcp", "cidr": "127.0.0.2/32", "ports": "1024-65535" } ],
    "hosts": { "allow": ["127.0.0.2", "localhost", "169.254.169.254"] }
  }
})";

struct records {
  std::mutex m;
  std::vector<connection_record> all;
  proxy::record_sink sink() {
    return [this](connection_record&& r) {
      std::lock_guard<std::mutex> g(m);
      all.push_back(std::move(r));
    };
  }
  std::vector<connection_record> snapshot() {
    std::lock_guard<std::mutex> g(m);
    return all;
  }
};

/// A server thread on 127.0.0.2 that answers every request head on every
/// connection with "HTTP/1.1 200" and the request line as the body.
class http_server {
public:
  http_server() {
    listener_ = listen_on("127.0.0.2", port_);
    thread_ = std::thread([this] { run(); });
  }
  ~http_server() {
    stop_ = true;
    ::shutdown(listener_.get(), SHUT_RDWR);
    thread_.join();
  }
  uint16_t port() const { return port_; }
  int connections() const { return connections_; }

private:
  void run() {
    std::vector<std::thread> conns;
    while (!stop_) {
      int fd = ::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0)
        break;
      ++connections_;
      conns.emplace_back([fd] {
        unique_fd c{fd};
        for (;;) {
          std::string head = read_head(c.get());
          if (head.empty())
            return;
          const std::string line = head.substr(0, head.find("\r\n"));
          std::string body = line + "\n";
          const auto cl = head.find("Content-Length: ");
          if (cl != std::string::npos) {
            std::size_t want = std::stoul(head.substr(cl + 16));
            std::string got;
            char ch;
            while (got.size() < want && ::read(c.get(), &ch, 1) == 1)
              got.push_back(ch);
            body += got + "\n";
          }
          if (head.find("Expect:") != std::string::npos)
            body += "the server saw Expect\n";
          const std::string out = "HTTP/1.1 200 OK\r\nContent-Length: " +
                                  std::to_string(body.size()) + "\r\nX-Test: yes\r\n\r\n" + body;
          if (::write(c.get(), out.data(), out.size()) != static_cast<ssize_t>(out.size()))
            return;
        }
      });
    }
    for (auto& t : conns)
      t.join();
  }
  unique_fd listener_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0};
  std::thread thread_;
};

struct proxy_fixture {
  records recs;
  fake_worker worker;
  std::unique_ptr<proxy::egress_proxy> proxy;

  explicit proxy_fixture(proxy::egress_limits limits = {}) {
    proxy = std::make_unique<proxy::egress_proxy>(limits, recs.sink());
    proxy->attach("p", 3, worker.take_proxy_end(), policy_from(test_policy), worker.exec);
  }

  /// Sends a request through a new proxy connection and returns all of the answer.
  std::string ask(const std::string& request) {
    auto c = worker.connect();
    write_all(c.get(), request);
    return read_all(c.get());
  }
};

proxy::egress_limits quick_limits() {
  proxy::egress_limits l;
  l.head_timeout = std::chrono::milliseconds(1500);
  return l;
}

} // namespace

BOOST_AUTO_TEST_SUITE(proxy_engine)

BOOST_AUTO_TEST_CASE(forwards_absolute_uri_requests_with_keep_alive) {
  http_server server;
  proxy_fixture f;
  auto c = f.worker.connect();
  const std::string base = "http://127.0.0.2:" + std::to_string(server.port());
  write_all(c.get(), "GET " + base + "/one?x=1 HTTP/1.1\r\nHost: 127.0.0.2\r\n"
                     "Proxy-Connection: keep-alive\r\n\r\n");
  std::string h1 = read_head(c.get());
  BOOST_TEST(h1.find("HTTP/1.1 200 OK") == 0u, h1);
  BOOST_TEST(h1.find("X-Test: yes") != std::string::npos, h1);
  std::string b1 = read_all(c.get(), std::string("GET /one?x=1 HTTP/1.1\n").size());
  BOOST_TEST(b1 == "GET /one?x=1 HTTP/1.1\n"); // origin-form upstream
  write_all(c.get(), "GET " + base + "/two HTTP/1.1\r\nHost: 127.0.0.2\r\nConnection: close\r\n\r\n");
  std::string rest = read_all(c.get());
  BOOST_TEST(rest.find("Connection: close") != std::string::npos, rest);
  BOOST_TEST(rest.find("GET /two HTTP/1.1\n") != std::string::npos, rest);
  BOOST_TEST(server.connections() == 1); // the upstream connection was kept
  f.proxy.reset();
  auto r = f.recs.snapshot();
  BOOST_REQUIRE(r.size() == 2u);
  BOOST_TEST(r[0].decision == "allow");
  BOOST_TEST(r[0].rule == "/net/rules/0");
  BOOST_TEST(r[0].address == "127.0.0.2");
  BOOST_TEST(r[0].pool == "p");
  BOOST_TEST(r[0].worker_id == 3u);
  BOOST_TEST(r[0].exec_id == 7u);
  BOOST_TEST(r[0].method == "GET");
  BOOST_TEST(r[0].bytes_out > 0u);
  BOOST_TEST(r[0].bytes_in > 0u);
}

BOOST_AUTO_TEST_CASE(a_body_with_expect_continue_is_forwarded) {
  http_server server;
  proxy_fixture f;
  auto c = f.worker.connect();
  write_all(c.get(), "POST http://127.0.0.2:" + std::to_string(server.port()) +
                       "/upload HTTP/1.1\r\nHost: 127.0.0.2\r\nContent-Length: 5\r\n"
                       "Expect: 100-continue\r\nConnection: close\r\n\r\n");
  const std::string interim = read_head(c.get());
  BOOST_TEST(interim == "HTTP/1.1 100 Continue\r\n\r\n");
  write_all(c.get(), "hello");
  const std::string answer = read_all(c.get());
  BOOST_TEST(answer.find("HTTP/1.1 200 OK") == 0u, answer);
  BOOST_TEST(answer.find("POST /upload HTTP/1.1\nhello\n") != std::string::npos, answer);
  BOOST_TEST(answer.find("the server saw Expect") == std::string::npos, answer);
}

BOOST_AUTO_TEST_CASE(denied_destinations_get_403_naming_the_rule) {
  http_server server;
  proxy_fixture f;
  const std::string port = std::to_string(server.port());
  auto loopback = f.ask("GET http://localhost:" + port + "/ HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(loopback.find("HTTP/1.1 403 Forbidden") == 0u, loopback);
  BOOST_TEST(loopback.find("by special-range: loopback") != std::string::npos, loopback);
  auto metadata = f.ask("CONNECT 169.254.169.254:80 HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(metadata.find("HTTP/1.1 403") == 0u, metadata);
  BOOST_TEST(metadata.find("cloud metadata") != std::string::npos, metadata);
  auto unlisted = f.ask("CONNECT example.com:443 HTTP/1.1\r\nHost: x\r\n\r\n");
  BOOST_TEST(unlisted.find("denied example.com:443 by /net/hosts/allow") != std::string::npos,
             unlisted);
  BOOST_TEST(server.connections() == 0);
  f.proxy.reset();
  auto r = f.recs.snapshot();
  BOOST_REQUIRE(r.size() == 3u);
  for (const auto& x : r) {
    BOOST_TEST(x.decision == "deny");
    BOOST_TEST(!x.reason.empty());
  }
  BOOST_TEST(r[0].address == "127.0.0.1");
}

BOOST_AUTO_TEST_CASE(bad_requests_are_answered_and_closed) {
  proxy_fixture f;
  BOOST_TEST(f.ask("GET /relative HTTP/1.1\r\nHost: x\r\n\r\n").find("HTTP/1.1 400") == 0u);
  BOOST_TEST(f.ask("GET https://127.0.0.2/ HTTP/1.1\r\n\r\n").find("HTTP/1.1 400") == 0u);
  BOOST_TEST(f.ask("CONNECT nohostport HTTP/1.1\r\n\r\n").find("HTTP/1.1 400") == 0u);
  BOOST_TEST(f.ask("NOT HTTP AT ALL\r\n\r\n").find("HTTP/1.1 400") == 0u);
  const std::string big = "GET http://127.0.0.2/ HTTP/1.1\r\nX: " + std::string(40000, 'a') +
                          "\r\n\r\n";
  BOOST_TEST(f.ask(big).find("HTTP/1.1 431") == 0u);
}

BOOST_AUTO_TEST_CASE(connections_beyond_the_per_worker_limit_get_429) {
  proxy::egress_limits l;
  l.connections_per_worker = 2;
  proxy_fixture f(l);
  auto a = f.worker.connect();
  auto b = f.worker.connect();
  auto c = f.worker.connect();
  const std::string answer = read_all(c.get());
  BOOST_TEST(answer.find("HTTP/1.1 429") == 0u, answer);
  BOOST_TEST(f.proxy->stats().refused == 1u);
}

BOOST_AUTO_TEST_CASE(the_byte_budget_of_an_exec_closes_the_tunnel) {
  uint16_t port = 0;
  auto listener = listen_on("127.0.0.2", port);
  std::thread server([&] {
    unique_fd c{::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    const std::string chunk(65536, 'z');
    for (int i = 0; i < 64; ++i)
      if (::send(c.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0)
        break;
  });
  proxy::egress_limits l;
  l.bytes_per_exec = 200000;
  proxy_fixture f(l);
  auto c = f.worker.connect();
  write_all(c.get(), "CONNECT 127.0.0.2:" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  const std::string got = read_all(c.get(), 8u << 20);
  server.join();
  BOOST_TEST(got.find("HTTP/1.1 200") == 0u);
  BOOST_TEST(got.size() < 400000u); // 4 MiB were sent
  // The exec's budget is spent: its next connection is refused outright.
  auto again = f.ask("CONNECT 127.0.0.2:" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  BOOST_TEST(again.find("HTTP/1.1 403") == 0u, again);
  BOOST_TEST(again.find("byte budget") != std::string::npos, again);
  // A new exec starts with a new budget.
  f.worker.exec->store(8);
  f.proxy.reset();
  auto r = f.recs.snapshot();
  BOOST_REQUIRE(!r.empty());
  BOOST_TEST(r[0].reason.find("byte budget") != std::string::npos, r[0].reason);
}

BOOST_AUTO_TEST_CASE(a_slowloris_client_and_a_100_mb_tunnel_do_not_starve_each_other) {
  constexpr std::size_t total = 100u << 20;
  uint16_t port = 0;
  auto listener = listen_on("127.0.0.2", port);
  std::thread server([&] {
    unique_fd c{::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC)};
    const std::string chunk(1 << 20, 'b');
    for (std::size_t sent = 0; sent < total; sent += chunk.size())
      if (::send(c.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL) <= 0)
        break;
  });
  proxy_fixture f(quick_limits());
  // The slow client: a request head, one byte every 50 ms, never finished
  // within the head timeout.
  std::string slow_answer;
  std::thread slow([&] {
    auto c = f.worker.connect();
    const std::string head = "GET http://127.0.0.2:" + std::to_string(port) +
                             "/ HTTP/1.1\r\nHost: 127.0.0.2\r\nX-Slow: " + std::string(200, 's');
    for (char ch : head) {
      if (::send(c.get(), &ch, 1, MSG_NOSIGNAL) != 1)
        break;
      pollfd p{c.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) > 0)
        break; // the proxy answered
    }
    slow_answer = read_all(c.get());
  });
  auto c = f.worker.connect();
  write_all(c.get(), "CONNECT 127.0.0.2:" + std::to_string(port) + " HTTP/1.1\r\n\r\n");
  const std::string head = read_head(c.get());
  BOOST_TEST(head.find("HTTP/1.1 200") == 0u, head);
  std::size_t received = 0;
  char buf[1 << 16];
  for (;;) {
    const ssize_t n = ::read(c.get(), buf, sizeof buf);
    if (n <= 0)
      break;
    received += static_cast<std::size_t>(n);
  }
  server.join();
  slow.join();
  BOOST_TEST(received == total);
  BOOST_TEST(slow_answer.find("HTTP/1.1 408") == 0u, slow_answer);
  f.proxy.reset();
  bool tunnel_recorded = false;
  for (const auto& r : f.recs.snapshot())
    if (r.method == "CONNECT" && r.bytes_in >= total) {
      tunnel_recorded = true;
      BOOST_TEST(r.decision == "allow");
    }
  BOOST_TEST(tunnel_recorded);
}

BOOST_AUTO_TEST_CASE(a_worker_that_goes_away_takes_its_connections_with_it) {
  proxy_fixture f;
  auto c = f.worker.connect();
  write_all(c.get(), "GET http://127.0.0.2/ HTTP/1.1\r\n"); // unfinished
  f.proxy->detach("p", 3);
  const std::string answer = read_all(c.get());
  BOOST_TEST(answer.empty()); // closed without an answer
  BOOST_TEST(f.proxy->stats().workers == 0u);
}

BOOST_AUTO_TEST_SUITE_END()
