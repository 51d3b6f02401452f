#pragma once

/// @file tcp_http.hpp
/// One HTTP/1.1 request over loopback TCP, plain or over TLS (Boost.Beast,
/// OpenSSL), with any headers: for the API's authentication tests. Reads
/// have a 30 s safety net (SO_RCVTIMEO).

#include <sys/socket.h>
#include <sys/time.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

#include "support/http_client.hpp"

namespace castellan::test {

using header_list = std::vector<std::pair<std::string, std::string>>;

/// An answer, with the headers the auth tests look at.
struct tcp_reply : http_reply {
  std::string www_authenticate;
};

namespace detail {

inline void safety_net(int fd) {
  timeval tv{30, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

template <class Stream>
tcp_reply exchange(Stream& s, const std::string& method, const std::string& target,
                   const std::string& body, const header_list& headers) {
  namespace http = boost::beast::http;
  http::request<http::string_body> req;
  req.method_string(method);
  req.target(target);
  req.version(11);
  req.set(http::field::host, "localhost");
  for (const auto& h : headers)
    req.set(h.first, h.second);
  if (method == "POST") {
    req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
  }
  tcp_reply out;
  http::write(s, req, out.error);
  if (out.error)
    return out;
  boost::beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);
  http::read(s, buf, parser, out.error);
  if (out.error)
    return out;
  auto& res = parser.get();
  out.status = res.result_int();
  out.content_type = std::string(res[http::field::content_type]);
  out.www_authenticate = std::string(res[http::field::www_authenticate]);
  out.body = res.body();
  out.keep_alive = res.keep_alive();
  return out;
}

} // namespace detail

/// `method target` on plain TCP to 127.0.0.1:`port`.
inline tcp_reply tcp_request(uint16_t port, const std::string& method, const std::string& target,
                             const std::string& body = {}, const header_list& headers = {}) {
  namespace net = boost::asio;
  net::io_context io;
  net::ip::tcp::socket sock(io);
  sock.connect({net::ip::make_address("127.0.0.1"), port});
  detail::safety_net(sock.native_handle());
  return detail::exchange(sock, method, target, body, headers);
}

/// The same over TLS, trusting only the certificate in `ca_file` and
/// checking that it names `host` (the SNI sent too).
inline tcp_reply tls_request(uint16_t port, const std::string& ca_file, const std::string& method,
                             const std::string& target, const std::string& body = {},
                             const header_list& headers = {},
                             const std::string& host = "localhost") {
  namespace net = boost::asio;
  namespace ssl = net::ssl;
  net::io_context io;
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(ca_file);
  ctx.set_verify_mode(ssl::verify_peer);
  ssl::stream<net::ip::tcp::socket> s(io, ctx);
  s.set_verify_callback(ssl::host_name_verification(host));
  // SSL_set_tlsext_host_name, without its macro's C cast.
  SSL_ctrl(s.native_handle(), SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
           const_cast<char*>(host.c_str()));
  s.next_layer().connect({net::ip::make_address("127.0.0.1"), port});
  detail::safety_net(s.next_layer().native_handle());
  tcp_reply out;
  s.handshake(ssl::stream_base::client, out.error);
  if (out.error)
    return out;
  return detail::exchange(s, method, target, body, headers);
}

} // namespace castellan::test
