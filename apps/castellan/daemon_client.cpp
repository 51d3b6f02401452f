#include "apps/castellan/daemon_client.hpp"

#include <unistd.h>

#include <sys/socket.h>

#include <cstdint>
#include <cstdlib>
#include <limits>
#include <variant>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace castellan::cli {

namespace asio = boost::asio;
namespace http = boost::beast::http;

outcome<daemon_address> daemon_address::parse(const std::string& text) {
  daemon_address a;
  auto bad = [&](const std::string& why) {
    return logic_failure("--connect '" + text + "': " + why +
                         " (unix:PATH, http://HOST:PORT or https://HOST:PORT)");
  };
  if (text.rfind("unix:", 0) == 0) {
    a.scheme = kind::unix_socket;
    a.path = text.substr(5);
    if (a.path.empty() || a.path.front() != '/')
      return bad("the socket path is not absolute");
    return a;
  }
  std::string rest;
  if (text.rfind("http://", 0) == 0) {
    a.scheme = kind::http;
    rest = text.substr(7);
  } else if (text.rfind("https://", 0) == 0) {
    a.scheme = kind::https;
    rest = text.substr(8);
  } else {
    return bad("unknown scheme");
  }
  if (!rest.empty() && rest.back() == '/')
    rest.pop_back();
  if (rest.find('/') != std::string::npos)
    return bad("a path after the host is not supported");
  std::size_t colon;
  if (!rest.empty() && rest.front() == '[') {
    const auto close = rest.find(']');
    if (close == std::string::npos)
      return bad("an unclosed '['");
    a.host = rest.substr(1, close - 1);
    colon = close + 1;
    if (colon < rest.size() && rest[colon] != ':')
      return bad("text after ']'");
  } else {
    colon = rest.rfind(':');
    a.host = rest.substr(0, colon);
  }
  if (a.host.empty())
    return bad("no host");
  a.port = colon < rest.size() ? rest.substr(colon + 1) : (a.scheme == kind::https ? "443" : "80");
  if (a.port.empty() || a.port.size() > 5 ||
      a.port.find_first_not_of("0123456789") != std::string::npos || std::stoul(a.port) > 65535)
    return bad("the port is not a number from 0 to 65535");
  return a;
}

std::string daemon_address::describe() const {
  switch (scheme) {
  case kind::unix_socket:
    return "unix:" + path;
  case kind::http:
    return "http://" + host + ":" + port;
  case kind::https:
    return "https://" + host + ":" + port;
  }
  return {};
}

std::string daemon_reply::error_code() const {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("code") && j["error"]["code"].is_string())
    return j["error"]["code"].get<std::string>();
  return {};
}

std::string daemon_reply::error_message() const {
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_object() && j.contains("error") && j["error"].is_object() &&
      j["error"].contains("message") && j["error"]["message"].is_string())
    return j["error"]["message"].get<std::string>();
  return "HTTP " + std::to_string(status) + ": " + body.substr(0, 200);
}

struct daemon_client::impl {
  using unix_socket = asio::local::stream_protocol::socket;
  using tcp_socket = asio::ip::tcp::socket;
  using tls_stream = asio::ssl::stream<tcp_socket>;

  asio::io_context io;
  std::unique_ptr<asio::ssl::context> tls;
  std::variant<std::monostate, unix_socket, tcp_socket, std::unique_ptr<tls_stream>> stream;
  boost::beast::flat_buffer buffer;
  std::string host_header;
  std::string token;

  int native_handle() {
    if (auto* u = std::get_if<unix_socket>(&stream))
      return u->native_handle();
    if (auto* t = std::get_if<tcp_socket>(&stream))
      return t->native_handle();
    if (auto* s = std::get_if<std::unique_ptr<tls_stream>>(&stream))
      return (*s)->next_layer().native_handle();
    return -1;
  }

  template <class Stream>
  outcome<daemon_reply> exchange(Stream& s, const http::request<http::string_body>& req) {
    boost::system::error_code ec;
    http::write(s, req, ec);
    if (ec)
      return logic_failure("sending the request: " + ec.message());
    http::response_parser<http::string_body> parser;
    parser.body_limit(256u * 1024 * 1024);
    http::read(s, buffer, parser, ec);
    if (ec)
      return logic_failure("reading the answer: " + ec.message());
    daemon_reply out;
    out.status = parser.get().result_int();
    out.content_type = std::string(parser.get()[http::field::content_type]);
    out.body = std::move(parser.get().body());
    return out;
  }
};

namespace {

/// Reads a streamed answer's body piece by piece (Beast's buffer_body).
template <class Stream>
outcome<daemon_reply> read_stream(Stream& s, boost::beast::flat_buffer& buffer,
                                  const http::request<http::string_body>& req,
                                  const std::function<bool(std::string_view)>& on_bytes) {
  boost::system::error_code ec;
  http::write(s, req, ec);
  if (ec)
    return logic_failure("sending the request: " + ec.message());
  http::response_parser<http::buffer_body> parser;
  // No limit, but not as boost::none: Boost 1.74's parser compares a
  // Content-Length with that empty optional as "above the limit" and fails
  // an error answer that has one.
  parser.body_limit(std::numeric_limits<std::uint64_t>::max());
  http::read_header(s, buffer, parser, ec);
  if (ec)
    return logic_failure("reading the answer: " + ec.message());
  daemon_reply out;
  out.status = parser.get().result_int();
  out.content_type = std::string(parser.get()[http::field::content_type]);
  const bool streamed = out.status == 200;
  char chunk[16384];
  while (!parser.is_done()) {
    parser.get().body().data = chunk;
    parser.get().body().size = sizeof(chunk);
    // read_some: what has arrived, not a full buffer (events trickle in).
    http::read_some(s, buffer, parser, ec);
    if (ec == http::error::need_buffer)
      ec = {};
    const std::size_t n = sizeof(chunk) - parser.get().body().size;
    if (n > 0) {
      if (!streamed)
        out.body.append(chunk, n);
      else if (!on_bytes(std::string_view(chunk, n)))
        return out;
    }
    if (ec) {
      if (ec == http::error::end_of_stream || ec == boost::asio::error::eof)
        break;
      return logic_failure("reading the answer: " + ec.message());
    }
    if (!streamed && out.body.size() > (16u << 20))
      return logic_failure("reading the answer: longer than 16 MiB");
  }
  return out;
}

} // namespace

daemon_client::daemon_client(std::unique_ptr<impl> p) : impl_(std::move(p)) {}
daemon_client::~daemon_client() = default;

outcome<std::unique_ptr<daemon_client>> daemon_client::connect(const daemon_address& where,
                                                               std::string token) {
  auto p = std::make_unique<impl>();
  p->token = std::move(token);
  boost::system::error_code ec;
  const std::string what = "cannot connect to the daemon at " + where.describe();
  if (where.scheme == daemon_address::kind::unix_socket) {
    impl::unix_socket s(p->io);
    s.connect(asio::local::stream_protocol::endpoint(where.path), ec);
    if (ec)
      return logic_failure(what + ": " + ec.message() +
                           (ec == asio::error::no_permission
                              ? " (the socket's mode or group does not admit this user)"
                              : ""));
    p->stream = std::move(s);
    p->host_header = "localhost";
  } else {
    asio::ip::tcp::resolver resolver(p->io);
    auto endpoints = resolver.resolve(where.host, where.port, ec);
    if (ec)
      return logic_failure(what + ": " + ec.message());
    impl::tcp_socket s(p->io);
    asio::connect(s, endpoints, ec);
    if (ec)
      return logic_failure(what + ": " + ec.message());
    p->host_header = where.host.find(':') != std::string::npos
                       ? "[" + where.host + "]:" + where.port
                       : where.host + ":" + where.port;
    if (where.scheme == daemon_address::kind::http) {
      p->stream = std::move(s);
    } else {
      p->tls = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_client);
      p->tls->set_options(asio::ssl::context::no_sslv2 | asio::ssl::context::no_sslv3 |
                          asio::ssl::context::no_tlsv1 | asio::ssl::context::no_tlsv1_1 |
                          asio::ssl::context::no_compression);
      if (const char* ca = std::getenv("CASTELLAN_CA_FILE"); ca != nullptr && *ca != '\0')
        p->tls->load_verify_file(ca, ec);
      else
        p->tls->set_default_verify_paths(ec);
      if (ec)
        return logic_failure(what + ": the CA certificates: " + ec.message());
      p->tls->set_verify_mode(asio::ssl::verify_peer);
      p->tls->set_verify_callback(asio::ssl::host_name_verification(where.host));
      auto tls = std::make_unique<impl::tls_stream>(std::move(s), *p->tls);
      // SNI: the name the certificate is checked against.
      // (SSL_set_tlsext_host_name, without the macro's C cast.)
      if (::SSL_ctrl(tls->native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                     const_cast<char*>(where.host.c_str())) != 1)
        return logic_failure(what + ": cannot set the TLS server name");
      tls->handshake(asio::ssl::stream_base::client, ec);
      if (ec)
        return logic_failure(what + ": TLS: " + ec.message());
      p->stream = std::move(tls);
    }
  }
  return std::unique_ptr<daemon_client>(new daemon_client(std::move(p)));
}

outcome<daemon_reply> daemon_client::request(const std::string& method, const std::string& target,
                                             const std::string& body) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, impl_->host_header);
  req.set(http::field::user_agent, "castellan-cli");
  if (!impl_->token.empty())
    req.set(http::field::authorization, "Bearer " + impl_->token);
  if (method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  auto& s = impl_->stream;
  if (auto* u = std::get_if<impl::unix_socket>(&s))
    return impl_->exchange(*u, req);
  if (auto* t = std::get_if<impl::tcp_socket>(&s))
    return impl_->exchange(*t, req);
  if (auto* tls = std::get_if<std::unique_ptr<impl::tls_stream>>(&s))
    return impl_->exchange(**tls, req);
  return logic_failure("not connected");
}

outcome<daemon_reply>
daemon_client::request_stream(const std::string& method, const std::string& target,
                              const std::string& body,
                              const std::function<bool(std::string_view)>& on_bytes) {
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, impl_->host_header);
  req.set(http::field::user_agent, "castellan-cli");
  req.set(http::field::accept, "text/event-stream");
  if (!impl_->token.empty())
    req.set(http::field::authorization, "Bearer " + impl_->token);
  if (method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  auto& s = impl_->stream;
  if (auto* u = std::get_if<impl::unix_socket>(&s))
    return read_stream(*u, impl_->buffer, req, on_bytes);
  if (auto* t = std::get_if<impl::tcp_socket>(&s))
    return read_stream(*t, impl_->buffer, req, on_bytes);
  if (auto* tls = std::get_if<std::unique_ptr<impl::tls_stream>>(&s))
    return read_stream(**tls, impl_->buffer, req, on_bytes);
  return logic_failure("not connected");
}

outcome<daemon_reply>
daemon_client::get_stream(const std::string& target,
                          const std::function<bool(std::string_view)>& on_bytes) {
  return request_stream("GET", target, {}, on_bytes);
}

int daemon_client::native_handle() const {
  return impl_->native_handle();
}

void daemon_client::shut_down() {
  // shutdown(2) on the descriptor, not a close: the other thread is still
  // inside a read on it, which returns at once.
  const int fd = impl_->native_handle();
  if (fd >= 0)
    ::shutdown(fd, SHUT_RDWR);
}

std::string connect_target(const std::string& flag) {
  if (!flag.empty())
    return flag;
  const char* env = std::getenv("CASTELLAN_CONNECT");
  return env != nullptr ? env : "";
}

std::string daemon_target(const std::string& flag) {
  std::string target = connect_target(flag);
  if (!target.empty())
    return target;
  if (::geteuid() == 0)
    return "unix:/run/castellan/castellan.sock";
  const char* dir = std::getenv("XDG_RUNTIME_DIR");
  return dir != nullptr && dir[0] == '/' ? std::string("unix:") + dir + "/castellan.sock" : "";
}

} // namespace castellan::cli
