#pragma once

/// @file api_client.hpp
/// A kept-alive HTTP/1.1 connection to the API's unix socket, for the
/// benchmarks: `POST /v1/exec` and whether it succeeded, as a client library
/// would send it.

#include <string>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace castellan::bench {

class api_client {
public:
  explicit api_client(const std::string& path) : socket_(io_) {
    socket_.connect(boost::asio::local::stream_protocol::endpoint(path));
  }

  /// Runs `code` (a Python literal-free snippet: it is put in a JSON string
  /// as is); true for a 200 whose error_class is ok.
  bool exec(const std::string& code) {
    namespace http = boost::beast::http;
    http::request<http::string_body> req{http::verb::post, "/v1/exec", 11};
    req.set(http::field::host, "localhost");
    req.set(http::field::content_type, "application/json");
    req.body() = R"({"code":")" + code + R"("})";
    req.prepare_payload();
    http::write(socket_, req);
    http::response<http::string_body> res;
    http::read(socket_, buffer_, res);
    return res.result_int() == 200 && res.body().find(R"("error_class":"ok")") != std::string::npos;
  }

  bool exec_pass() { return exec("pass"); }

private:
  boost::asio::io_context io_;
  boost::asio::local::stream_protocol::socket socket_;
  boost::beast::flat_buffer buffer_;
};

} // namespace castellan::bench
