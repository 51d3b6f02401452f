#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <grp.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <future>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "actors/api/http_server.hpp"
#include "support/http_client.hpp"
#include "support/skip.hpp"
#include "support/tcp_http.hpp"
#include "support/test_certificate.hpp"

using namespace castellan;
using namespace castellan::api;
using castellan::test::http_client;

namespace {

/// A private directory for the sockets of one test.
struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/castellan-api-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

/// A server that answers every request with what it received, except
/// `/hold`, which it never answers (until the client goes away).
struct echo_server {
  temp_dir dir;
  std::string socket_path = dir.path + "/api.sock";
  std::unique_ptr<http_server> server;
  std::promise<uint64_t> abandoned;
  std::promise<uint64_t> held;

  explicit echo_server(http_limits limits = {}, std::vector<listen_address> extra = {},
                       const tls_files& tls = {}) {
    listen_address a;
    a.path = socket_path;
    extra.insert(extra.begin(), a);
    http_server::callbacks cb;
    cb.on_request = [this](http_request req) {
      if (req.target == "/hold") {
        held.set_value(req.id);
        return;
      }
      http_response r;
      r.body = nlohmann::json{{"method", req.method},
                              {"target", req.target},
                              {"body", req.body},
                              {"tcp", req.tcp},
                              {"tls", req.tls}}
                   .dump();
      server->respond(req.id, std::move(r));
    };
    cb.on_abandoned = [this](uint64_t id) { abandoned.set_value(id); };
    auto s = http_server::start(extra, limits, std::move(cb), {}, tls);
    BOOST_REQUIRE_MESSAGE(s, (s ? "" : s.error().describe()));
    server = std::move(*s);
  }
};

template <class T> T wait_for(std::promise<T>& p) {
  auto f = p.get_future();
  BOOST_REQUIRE_MESSAGE(f.wait_for(std::chrono::seconds(30)) == std::future_status::ready,
                        "no event in 30 s");
  return f.get();
}

} // namespace

BOOST_AUTO_TEST_SUITE(api_http_server)

BOOST_AUTO_TEST_CASE(the_socket_is_0600_owned_by_the_server_and_removed_at_stop) {
  echo_server s;
  struct stat st {};
  BOOST_REQUIRE(::lstat(s.socket_path.c_str(), &st) == 0);
  BOOST_TEST(S_ISSOCK(st.st_mode));
  BOOST_TEST((st.st_mode & 07777) == 0600u);
  BOOST_TEST(st.st_uid == ::geteuid());
  http_client c(s.socket_path);
  auto r = c.get("/x");
  BOOST_TEST(r.status == 200u);
  BOOST_TEST(r.json()["target"] == "/x");
  s.server->stop();
  BOOST_TEST(::lstat(s.socket_path.c_str(), &st) != 0);
  BOOST_TEST(errno == ENOENT);
}

BOOST_AUTO_TEST_CASE(another_user_cannot_connect) {
  if (::geteuid() != 0) {
    castellan::test::skip("becoming another user to connect needs root");
    return;
  }
  echo_server s;
  // The directory open to all, so that only the socket's own mode decides.
  BOOST_REQUIRE(::chmod(s.dir.path.c_str(), 0755) == 0);
  pid_t child = ::fork();
  BOOST_REQUIRE(child >= 0);
  if (child == 0) {
    // nobody: no capability, another uid and gid.
    if (::setgroups(0, nullptr) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)
      ::_exit(3);
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, s.socket_path.c_str());
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
      ::_exit(1);
    ::_exit(errno == EACCES ? 0 : 2);
  }
  int status = 0;
  BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
  BOOST_REQUIRE(WIFEXITED(status));
  BOOST_TEST(WEXITSTATUS(status) == 0, "0: EACCES, 1: connected, 2: another error, 3: setuid");
  // Its owner still can.
  http_client c(s.socket_path);
  BOOST_TEST(c.get("/").status == 200u);
}

BOOST_AUTO_TEST_CASE(a_socket_of_mode_0660_admits_its_group_and_no_one_else) {
  if (::geteuid() != 0) {
    castellan::test::skip("giving the socket a group and becoming its members needs root");
    return;
  }
  temp_dir dir;
  BOOST_REQUIRE(::chmod(dir.path.c_str(), 0755) == 0);
  listen_address a;
  a.path = dir.path + "/api.sock";
  // 65533: a group id no account here has as its own.
  unix_socket_access access{0660, 65533};
  auto srv = http_server::start({a}, {}, {[](http_request) {}, [](uint64_t) {}, {}}, access);
  BOOST_REQUIRE_MESSAGE(srv, (srv ? "" : srv.error().describe()));
  struct stat st {};
  BOOST_REQUIRE(::lstat(a.path.c_str(), &st) == 0);
  BOOST_TEST((st.st_mode & 07777) == 0660u);
  BOOST_TEST(st.st_gid == 65533u);
  BOOST_TEST(st.st_uid == ::geteuid());
  // A child as nobody, with and without the socket's group as a
  // supplementary group: 0 connected, 1 EACCES, 2 another error, 3 setuid.
  auto connect_as_nobody = [&](bool member) {
    pid_t child = ::fork();
    BOOST_REQUIRE(child >= 0);
    if (child == 0) {
      gid_t groups[] = {65533};
      if (::setgroups(member ? 1 : 0, groups) != 0 || ::setgid(65534) != 0 || ::setuid(65534) != 0)
        ::_exit(3);
      int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
      sockaddr_un addr{};
      addr.sun_family = AF_UNIX;
      std::strcpy(addr.sun_path, a.path.c_str());
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0)
        ::_exit(0);
      ::_exit(errno == EACCES ? 1 : 2);
    }
    int status = 0;
    BOOST_REQUIRE(::waitpid(child, &status, 0) == child);
    BOOST_REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
  };
  BOOST_TEST(connect_as_nobody(true) == 0);
  BOOST_TEST(connect_as_nobody(false) == 1);
}

BOOST_AUTO_TEST_CASE(a_stale_socket_is_replaced_a_live_one_and_a_file_are_refused) {
  temp_dir dir;
  const std::string path = dir.path + "/api.sock";
  {
    // A socket nobody listens on any more: what a killed server leaves.
    int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strcpy(addr.sun_path, path.c_str());
    BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0);
    ::close(fd);
  }
  listen_address a;
  a.path = path;
  auto first = http_server::start({a}, {}, {[](http_request) {}, [](uint64_t) {}, {}});
  BOOST_REQUIRE_MESSAGE(first, (first ? "" : first.error().describe()));
  auto second = http_server::start({a}, {}, {[](http_request) {}, [](uint64_t) {}, {}});
  BOOST_REQUIRE(!second);
  BOOST_TEST(second.error().describe().find("another server is listening on '" + path + "'") !=
             std::string::npos);
  // The refused server left the live one's socket alone.
  http_client still(path);
  (*first)->stop();

  std::ofstream(path) << "not a socket";
  auto third = http_server::start({a}, {}, {[](http_request) {}, [](uint64_t) {}, {}});
  BOOST_REQUIRE(!third);
  BOOST_TEST(third.error().describe().find("exists and is not a socket") != std::string::npos);
  struct stat st {};
  BOOST_TEST(::lstat(path.c_str(), &st) == 0);
  BOOST_TEST(S_ISREG(st.st_mode));
}

BOOST_AUTO_TEST_CASE(tcp_listens_on_loopback_only) {
  listen_address any;
  any.type = listen_address::kind::tcp;
  any.host = "0.0.0.0";
  auto refused = http_server::start({any}, {}, {[](http_request) {}, [](uint64_t) {}, {}});
  BOOST_REQUIRE(!refused);
  BOOST_TEST(refused.error().describe().find("not a loopback address") != std::string::npos);

  listen_address lo;
  lo.type = listen_address::kind::tcp;
  lo.host = "127.0.0.1";
  echo_server s({}, {lo});
  BOOST_REQUIRE(s.server->bound().size() == 2u);
  const uint16_t port = s.server->bound()[1].port;
  BOOST_TEST(port != 0u);
  namespace net = boost::asio;
  namespace http = boost::beast::http;
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  http::request<http::string_body> req{http::verb::get, "/over-tcp", 11};
  req.set(http::field::host, "127.0.0.1");
  http::write(sock, req);
  boost::beast::flat_buffer buf;
  http::response<http::string_body> res;
  http::read(sock, buf, res);
  BOOST_TEST(res.result_int() == 200u);
  auto j = nlohmann::json::parse(res.body());
  BOOST_TEST(j["target"] == "/over-tcp");
  BOOST_TEST(j["tcp"] == true);
}

BOOST_AUTO_TEST_CASE(keep_alive_and_pipelined_requests_are_answered_in_order) {
  echo_server s;
  http_client c(s.socket_path);
  auto a = c.get("/a");
  auto b = c.request("POST", "/b", "body-b");
  BOOST_TEST(a.keep_alive);
  BOOST_TEST(a.json()["target"] == "/a");
  BOOST_TEST(b.json()["body"] == "body-b");
  c.send_raw("GET /c HTTP/1.1\r\nHost: x\r\n\r\nGET /d HTTP/1.1\r\nHost: x\r\n\r\n");
  auto cr = c.read();
  auto dr = c.read();
  BOOST_TEST(cr.json()["target"] == "/c");
  BOOST_TEST(dr.json()["target"] == "/d");
}

BOOST_AUTO_TEST_CASE(a_pipeline_beyond_the_read_ahead_is_answered_whole_and_then_closed) {
  // More pipelined bytes than the server reads ahead (64 KiB): while it
  // answers the first of them it reads nothing more, and its connection
  // must live on until every answer is written.
  echo_server s;
  const int n = 3000;
  std::string pipeline;
  for (int i = 0; i < n; ++i)
    pipeline += "GET /p" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  BOOST_REQUIRE_GT(pipeline.size(), 64u * 1024u);
  http_client c(s.socket_path);
  // Sent from another thread: the server takes the rest only as the
  // answers are read here.
  auto sent = std::async(std::launch::async, [&] { c.send_raw(pipeline); });
  for (int i = 0; i < n; ++i) {
    auto r = c.read();
    BOOST_REQUIRE_MESSAGE(r.status == 200u, "answer " << i << ": " << r.error.message());
    BOOST_REQUIRE_EQUAL(r.json()["target"].get<std::string>(), "/p" + std::to_string(i));
  }
  sent.get();
  c.close();
  // And the connection is counted out once its client goes.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (s.server->connections() != 0) {
    BOOST_REQUIRE_MESSAGE(std::chrono::steady_clock::now() < deadline,
                          s.server->connections() << " connections still counted");
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

BOOST_AUTO_TEST_CASE(http_1_0_and_connection_close_are_answered_then_closed) {
  echo_server s;
  {
    http_client c(s.socket_path);
    c.send_raw("GET /old HTTP/1.0\r\n\r\n");
    auto r = c.read();
    BOOST_TEST(r.status == 200u);
    BOOST_TEST(!r.keep_alive);
    BOOST_TEST(r.json()["target"] == "/old");
    BOOST_TEST(c.closed_by_server());
  }
  {
    http_client c(s.socket_path);
    c.send_raw("GET /once HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    auto r = c.read();
    BOOST_TEST(r.status == 200u);
    BOOST_TEST(!r.keep_alive);
    BOOST_TEST(r.json()["target"] == "/once");
    BOOST_TEST(c.closed_by_server());
  }
  {
    // HTTP/1.0 asking for keep-alive keeps its connection.
    http_client c(s.socket_path);
    c.send_raw("GET /k1 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto r1 = c.read();
    BOOST_TEST(r1.keep_alive);
    c.send_raw("GET /k2 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    auto r2 = c.read();
    BOOST_TEST(r2.json()["target"] == "/k2");
  }
}

BOOST_AUTO_TEST_CASE(answers_from_many_threads_reach_their_own_clients) {
  // Answers are written by the threads that give them: each must reach the
  // connection of its request, in order, under many clients at once.
  temp_dir dir;
  listen_address a;
  a.path = dir.path + "/api.sock";
  std::unique_ptr<http_server> server;
  std::vector<std::thread> answerers;
  std::mutex m;
  http_server::callbacks cb;
  cb.on_request = [&](http_request req) {
    // Answered from a thread of its own, after a moment.
    std::lock_guard<std::mutex> guard(m);
    answerers.emplace_back([&server, id = req.id, target = req.target] {
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      http_response r;
      r.body = nlohmann::json{{"target", target}}.dump();
      server->respond(id, std::move(r));
    });
  };
  auto started = http_server::start({a}, {}, std::move(cb));
  BOOST_REQUIRE(started);
  server = std::move(*started);
  std::vector<std::future<void>> clients;
  for (int c = 0; c < 8; ++c)
    clients.push_back(std::async(std::launch::async, [&, c] {
      http_client client(a.path);
      for (int i = 0; i < 50; ++i) {
        const std::string target = "/c" + std::to_string(c) + "/" + std::to_string(i);
        auto r = client.get(target);
        BOOST_REQUIRE_EQUAL(r.status, 200u);
        BOOST_REQUIRE_EQUAL(r.json()["target"].get<std::string>(), target);
      }
    }));
  for (auto& f : clients)
    f.get();
  server->stop();
  for (auto& t : answerers)
    t.join();
}

BOOST_AUTO_TEST_CASE(expect_100_continue_is_answered_before_the_body) {
  echo_server s;
  http_client c(s.socket_path);
  c.send_raw("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n");
  auto cont = c.read();
  BOOST_TEST(cont.status == 100u);
  c.send_raw("hello");
  auto r = c.read();
  BOOST_TEST(r.status == 200u);
  BOOST_TEST(r.json()["body"] == "hello");
}

BOOST_AUTO_TEST_CASE(oversized_headers_get_431_and_the_connection_closes) {
  http_limits limits;
  limits.header_bytes = 1024;
  echo_server s(limits);
  http_client c(s.socket_path);
  c.send_raw("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(4096, 'a') + "\r\n\r\n");
  auto r = c.read();
  BOOST_TEST(r.status == 431u);
  BOOST_TEST(r.error_code() == "headers_too_large");
  BOOST_TEST(c.closed_by_server());
}

BOOST_AUTO_TEST_CASE(oversized_bodies_get_413_declared_or_chunked) {
  http_limits limits;
  limits.body_bytes = 1000;
  echo_server s(limits);
  {
    http_client c(s.socket_path);
    c.send_raw("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1001\r\n\r\n");
    auto r = c.read();
    BOOST_TEST(r.status == 413u);
    BOOST_TEST(r.error_code() == "body_too_large");
    BOOST_TEST(r.error_message().find("1000 bytes") != std::string::npos);
    BOOST_TEST(c.closed_by_server());
  }
  {
    http_client c(s.socket_path);
    std::string chunks;
    for (int i = 0; i < 3; ++i)
      chunks += "190\r\n" + std::string(400, 'x') + "\r\n"; // 3 x 400 bytes
    c.send_raw("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + chunks +
               "0\r\n\r\n");
    auto r = c.read();
    BOOST_TEST(r.status == 413u);
    BOOST_TEST(c.closed_by_server());
  }
  {
    // Exactly at the limit is accepted.
    http_client c(s.socket_path);
    auto r = c.request("POST", "/", std::string(1000, 'y'));
    BOOST_TEST(r.status == 200u);
  }
}

BOOST_AUTO_TEST_CASE(large_bodies_pass_through_the_bounded_buffer) {
  echo_server s; // 4 MiB body limit; the connection's buffer holds far less
  http_client c(s.socket_path);
  const std::string big(3 * 1024 * 1024, 'z');
  auto r = c.request("POST", "/", big);
  BOOST_REQUIRE(r.status == 200u);
  BOOST_TEST(r.json()["body"].get<std::string>() == big);
  std::string chunked = "POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 48; ++i)
    chunked += "10000\r\n" + std::string(65536, 'k') + "\r\n"; // 3 MiB in 64 KiB chunks
  chunked += "0\r\n\r\n";
  c.send_raw(chunked);
  auto rc = c.read();
  BOOST_REQUIRE(rc.status == 200u);
  BOOST_TEST(rc.json()["body"].get<std::string>().size() == 48u * 65536u);
}

BOOST_AUTO_TEST_CASE(an_endless_chunk_header_is_refused) {
  // Beast bounds headers and bodies but not a chunk header's length: the
  // connection's buffer does, so this cannot grow the server's memory.
  echo_server s;
  http_client c(s.socket_path);
  c.send_raw("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n1;");
  const std::string junk(64 * 1024, 'a');
  boost::system::error_code ec;
  for (int i = 0; i < 64 && !ec; ++i) // up to 4 MiB, until the server closes
    boost::asio::write(c.socket(), boost::asio::buffer(junk), ec);
  auto r = c.read();
  BOOST_TEST(r.status == 400u);
  BOOST_TEST(r.error_message().find("chunk header") != std::string::npos, r.body);
  BOOST_TEST(c.closed_by_server());
}

BOOST_AUTO_TEST_CASE(ambiguous_framing_is_refused_not_guessed) {
  // Request smuggling needs two parsers to disagree on where a request
  // ends: the server refuses every framing that admits two readings.
  echo_server s;
  const char* cases[] = {
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
      "0\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello!",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
      "POST / HTTP/1.1\r\nHost: x\r\nContent-Length : 5\r\n\r\nhello",
      "GET / HTTP/1.1\r\nHost: x\r\n\nX: y\r\n\r\n",
  };
  for (const char* raw : cases) {
    BOOST_TEST_CONTEXT(raw) {
      http_client c(s.socket_path);
      c.send_raw(raw);
      auto r = c.read();
      BOOST_TEST(r.status == 400u);
      BOOST_TEST(r.error_code() == "bad_http");
      BOOST_TEST(c.closed_by_server());
    }
  }
}

BOOST_AUTO_TEST_CASE(a_slow_client_is_disconnected) {
  http_limits limits;
  limits.read_timeout = std::chrono::milliseconds(200);
  echo_server s(limits);
  // Slowloris: headers begun, never finished.
  http_client slow(s.socket_path);
  slow.send_raw("GET / HTTP/1.1\r\nHost: x\r\n");
  BOOST_TEST(slow.closed_by_server());
  // A connection that never sends a byte.
  http_client silent(s.socket_path);
  BOOST_TEST(silent.closed_by_server());
  // An idle kept-alive connection, after one answered request.
  http_client idle(s.socket_path);
  BOOST_TEST(idle.get("/").status == 200u);
  BOOST_TEST(idle.closed_by_server());
}

BOOST_AUTO_TEST_CASE(connections_beyond_the_limit_are_refused_with_503) {
  http_limits limits;
  limits.max_connections = 2;
  echo_server s(limits);
  http_client a(s.socket_path);
  http_client b(s.socket_path);
  // Both admitted (answered) before the third connects.
  BOOST_TEST(a.get("/a").status == 200u);
  BOOST_TEST(b.get("/b").status == 200u);
  http_client c(s.socket_path);
  auto r = c.read();
  BOOST_TEST(r.status == 503u);
  BOOST_TEST(r.error_code() == "too_many_connections");
  BOOST_TEST(c.closed_by_server());
  // The admitted ones are unaffected.
  BOOST_TEST(a.get("/a2").status == 200u);
}

BOOST_AUTO_TEST_CASE(a_client_that_goes_away_abandons_its_request) {
  echo_server s;
  http_client c(s.socket_path);
  c.send("GET", "/hold");
  const uint64_t id = wait_for(s.held);
  c.close();
  BOOST_TEST(wait_for(s.abandoned) == id);
  // A late answer to it is dropped; the server goes on.
  s.server->respond(id, http_response{});
  http_client d(s.socket_path);
  BOOST_TEST(d.get("/after").status == 200u);
}

BOOST_AUTO_TEST_CASE(a_half_close_counts_as_going_away) {
  // On a unix socket a client's close and its shutdown(SHUT_WR) read the
  // same (end of file): both abandon the request (docs/api.md).
  echo_server s;
  http_client c(s.socket_path);
  c.send("GET", "/hold");
  const uint64_t id = wait_for(s.held);
  c.socket().shutdown(boost::asio::socket_base::shutdown_send);
  BOOST_TEST(wait_for(s.abandoned) == id);
}

// -- TLS ------------------------------------------------------------------------

namespace {

listen_address tls_loopback() {
  listen_address a;
  a.type = listen_address::kind::tcp;
  a.host = "127.0.0.1";
  a.tls = true;
  return a;
}

/// A raw TCP connection to 127.0.0.1:`port` with the 30 s safety net.
int raw_connect(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  BOOST_REQUIRE(fd >= 0);
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in sin{};
  sin.sin_family = AF_INET;
  sin.sin_port = htons(port);
  sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&sin), sizeof sin) == 0);
  return fd;
}

/// Whether the server closes `fd` (EOF or reset) rather than answering or
/// leaving it open until the 30 s safety net.
bool closed_by_server(int fd) {
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0 || (n < 0 && errno == ECONNRESET))
      return true;
    if (n < 0)
      return false; // the safety net (EAGAIN), or another error
    // TLS alerts may come first; what matters is the end.
  }
}

} // namespace

BOOST_AUTO_TEST_CASE(a_tls_listener_speaks_tls_only) {
  temp_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  echo_server s({}, {tls_loopback()}, {cert.cert_file, cert.key_file});
  const auto& b = s.server->bound()[1];
  BOOST_TEST(b.to_string() == "tls:127.0.0.1:" + std::to_string(b.port));
  auto r = castellan::test::tls_request(b.port, cert.cert_file, "GET", "/x");
  BOOST_REQUIRE_MESSAGE(r.status == 200u, r.error.message());
  BOOST_TEST(r.json()["tls"] == true);
  BOOST_TEST(r.json()["tcp"] == true);
  // A plain HTTP client gets no HTTP answer: the handshake fails and the
  // connection is closed.
  int fd = raw_connect(b.port);
  const std::string plain = "GET /x HTTP/1.1\r\nHost: localhost\r\n\r\n";
  BOOST_REQUIRE(::write(fd, plain.data(), plain.size()) == static_cast<ssize_t>(plain.size()));
  std::string got;
  char buf[512];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0)
    got.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  BOOST_TEST(got.find("HTTP/1.1") == std::string::npos, got);
  BOOST_TEST((n == 0 || errno == ECONNRESET));
  // The unix socket beside it is still plain.
  http_client c(s.socket_path);
  BOOST_TEST(c.get("/u").json()["tls"] == false);
}

BOOST_AUTO_TEST_CASE(tls_below_1_2_and_renegotiation_are_refused) {
  temp_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  echo_server s({}, {tls_loopback()}, {cert.cert_file, cert.key_file});
  const uint16_t port = s.server->bound()[1].port;
  // A client that would speak TLS 1.0 or 1.1 only (its own floor lowered
  // below what Debian's OpenSSL allows by default).
  {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_security_level(ctx, 0);
    SSL_CTX_set_min_proto_version(ctx, TLS1_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_1_VERSION);
    SSL* ssl = SSL_new(ctx);
    int fd = raw_connect(port);
    SSL_set_fd(ssl, fd);
    BOOST_TEST(SSL_connect(ssl) != 1, "a TLS 1.1 handshake must fail");
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ::close(fd);
    ERR_clear_error();
  }
  // TLS 1.2, then a renegotiation the client starts.
  {
    SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
    SSL_CTX_set_max_proto_version(ctx, TLS1_2_VERSION);
    SSL* ssl = SSL_new(ctx);
    int fd = raw_connect(port);
    SSL_set_fd(ssl, fd);
    BOOST_REQUIRE(SSL_connect(ssl) == 1);
    BOOST_TEST(SSL_version(ssl) == TLS1_2_VERSION);
    BOOST_REQUIRE(SSL_renegotiate(ssl) == 1);
    SSL_do_handshake(ssl);
    // The server answers the new ClientHello with a no_renegotiation alert.
    char buf[256];
    const int n = SSL_read(ssl, buf, sizeof buf);
    BOOST_TEST(n <= 0);
    const unsigned long e = ERR_peek_last_error();
    BOOST_TEST(ERR_GET_REASON(e) == SSL_R_NO_RENEGOTIATION, ERR_reason_error_string(e));
    SSL_free(ssl);
    SSL_CTX_free(ctx);
    ::close(fd);
    ERR_clear_error();
  }
}

BOOST_AUTO_TEST_CASE(the_read_timeout_covers_the_tls_handshake) {
  temp_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  http_limits limits;
  limits.read_timeout = std::chrono::milliseconds(200);
  echo_server s(limits, {tls_loopback()}, {cert.cert_file, cert.key_file});
  const uint16_t port = s.server->bound()[1].port;
  // A connection that never starts the handshake.
  int silent = raw_connect(port);
  BOOST_TEST(closed_by_server(silent));
  ::close(silent);
  // One that starts a ClientHello and stalls: the record header of a 512
  // byte handshake record, and 3 bytes of it.
  int stalled = raw_connect(port);
  const unsigned char part[] = {0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01};
  BOOST_REQUIRE(::write(stalled, part, sizeof part) == static_cast<ssize_t>(sizeof part));
  BOOST_TEST(closed_by_server(stalled));
  ::close(stalled);
  // A whole handshake and then silence: the first request's timeout.
  namespace net = boost::asio;
  net::io_context io;
  net::ssl::context ctx(net::ssl::context::tls_client);
  ctx.load_verify_file(cert.cert_file);
  net::ssl::stream<net::ip::tcp::socket> t(io, ctx);
  t.next_layer().connect({net::ip::make_address("127.0.0.1"), port});
  timeval tv{30, 0};
  ::setsockopt(t.next_layer().native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  t.handshake(net::ssl::stream_base::client);
  char c;
  boost::system::error_code ec;
  t.read_some(net::buffer(&c, 1), ec);
  BOOST_TEST((ec == net::error::eof || ec == net::ssl::error::stream_truncated ||
              ec == net::error::connection_reset),
             ec.message());
}

BOOST_AUTO_TEST_CASE(a_tls_listener_needs_a_matching_certificate_and_key) {
  temp_dir dir;
  auto cert = castellan::test::make_test_certificate(dir.path);
  auto other = castellan::test::make_test_certificate(dir.path, "other");
  auto try_start = [&](const tls_files& tls) {
    auto srv =
        http_server::start({tls_loopback()}, {}, {[](http_request) {}, [](uint64_t) {}, {}}, {}, tls);
    return srv ? std::string() : srv.error().describe();
  };
  BOOST_TEST(try_start({}).find("a TLS listener needs a certificate and a key") !=
             std::string::npos);
  BOOST_TEST(try_start({cert.cert_file, other.key_file}).find("does not match the certificate") !=
             std::string::npos);
  BOOST_TEST(try_start({dir.path + "/none.pem", cert.key_file})
                 .find("certificate chain " + dir.path + "/none.pem") != std::string::npos);
  BOOST_TEST(try_start({cert.cert_file, cert.key_file}).empty());
  BOOST_TEST(check_tls_files({cert.cert_file, other.key_file}).find("does not match") !=
             std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
