#pragma once

/// @file http_client.hpp
/// A blocking HTTP/1.1 client over a unix socket (Boost.Beast), for the API
/// tests. Every read has a 30 s safety net (SO_RCVTIMEO) so that no test can
/// hang on a server that does not answer.

#include <sys/socket.h>
#include <sys/time.h>

#include <string>
#include <utility>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

namespace castellan::test {

struct http_reply {
  unsigned status = 0;
  std::string content_type;
  std::string body;
  bool keep_alive = false;
  boost::system::error_code error; ///< set when no whole response came

  nlohmann::json json() const { return nlohmann::json::parse(body); }
  /// The error code of an API error body, or "".
  std::string error_code() const {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object())
      return j["error"].value("code", "");
    return "";
  }
  std::string error_message() const {
    auto j = nlohmann::json::parse(body, nullptr, false);
    if (j.is_object() && j.contains("error") && j["error"].is_object())
      return j["error"].value("message", "");
    return "";
  }
};

class http_client {
public:
  explicit http_client(const std::string& path) : socket_(io_) {
    socket_.connect(boost::asio::local::stream_protocol::endpoint(path));
    timeval tv{30, 0};
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ::setsockopt(socket_.native_handle(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  }

  /// Sends one request (keep-alive) and reads its response.
  using headers = std::vector<std::pair<std::string, std::string>>;

  http_reply request(const std::string& method, const std::string& target,
                     const std::string& body = {},
                     const std::string& content_type = "application/json",
                     const headers& extra = {}) {
    send(method, target, body, content_type, extra);
    return read();
  }

  http_reply post(const std::string& target, const nlohmann::json& body) {
    return request("POST", target, body.dump());
  }
  http_reply get(const std::string& target) { return request("GET", target); }

  void send(const std::string& method, const std::string& target, const std::string& body = {},
            const std::string& content_type = "application/json", const headers& extra = {}) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req;
    req.method_string(method);
    req.target(target);
    req.version(11);
    req.set(http::field::host, "localhost");
    for (const auto& h : extra)
      req.set(h.first, h.second);
    if (!body.empty() || method == "POST") {
      if (!content_type.empty())
        req.set(http::field::content_type, content_type);
      req.body() = body;
      req.prepare_payload();
    }
    http::write(socket_, req);
  }

  /// Writes bytes as they are (malformed requests, slow clients).
  void send_raw(const std::string& bytes) {
    boost::asio::write(socket_, boost::asio::buffer(bytes));
  }

  http_reply read() {
    namespace http = boost::beast::http;
    http_reply out;
    http::response_parser<http::string_body> parser;
    parser.body_limit(64 * 1024 * 1024);
    http::read(socket_, buffer_, parser, out.error);
    if (out.error)
      return out;
    auto& res = parser.get();
    out.status = res.result_int();
    out.content_type = std::string(res[http::field::content_type]);
    out.body = res.body();
    out.keep_alive = res.keep_alive();
    return out;
  }

  /// True when the server closed the connection: a read gives EOF (or a
  /// reset), not data and not the 30 s timeout.
  bool closed_by_server() {
    char c;
    boost::system::error_code ec;
    std::size_t n = socket_.read_some(boost::asio::buffer(&c, 1), ec);
    return n == 0 && (ec == boost::asio::error::eof || ec == boost::asio::error::connection_reset);
  }

  void close() {
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

  boost::asio::local::stream_protocol::socket& socket() { return socket_; }

private:
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::beast::flat_buffer buffer_;
};

} // namespace castellan::test
