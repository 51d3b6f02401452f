#pragma once

/// @file http_message_parser.hpp
/// One HTTP/1.x message stream (requests from a sandbox, or responses from
/// a remote server) parsed incrementally with http_parser. The parser stops
/// after the head and after the message, so that the proxy can decide,
/// connect or answer before it reads further, and so that pipelined bytes
/// stay unread. The body arrives de-framed (chunked framing removed); the
/// proxy frames it again on the way out.

#include <http_parser.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace castellan::proxy {

/// A parsed request or response head.
struct http_head {
  std::string method;   ///< requests: "GET", "CONNECT", …
  std::string target;   ///< requests: the request-target as sent
  unsigned status = 0;  ///< responses
  std::string reason;   ///< responses
  unsigned short major = 1;
  unsigned short minor = 1;
  std::vector<std::pair<std::string, std::string>> headers; ///< in order, as sent
  bool keep_alive = false;   ///< the sender wants the connection kept (http_should_keep_alive)
  bool chunked = false;      ///< Transfer-Encoding: chunked
  std::optional<uint64_t> content_length;
  bool upgrade = false;      ///< CONNECT, or an Upgrade the parser stopped at
  /// Responses: the body runs until the connection closes.
  bool body_until_close = false;

  /// The first header named `name` (ASCII case-insensitive), or nullptr.
  const std::string* find(std::string_view name) const noexcept;
};

/// ASCII case-insensitive equality.
bool iequals(std::string_view a, std::string_view b) noexcept;

class http_message_parser {
public:
  enum class kind : uint8_t { request, response };

  /// `max_head_bytes` caps the request line or status line plus headers.
  http_message_parser(kind k, std::size_t max_head_bytes);

  http_message_parser(const http_message_parser&) = delete;
  http_message_parser& operator=(const http_message_parser&) = delete;

  /// Forgets the current message: the next byte starts a new one.
  void reset();

  /// Responses: the request was HEAD, so the response has no body whatever
  /// its headers say. Call before feeding the response.
  void expect_no_body(bool yes) noexcept { no_body_ = yes; }

  /// Parses from `data` until the head is complete, the message is
  /// complete, an error occurs, or `data` is used up; returns how many bytes
  /// were consumed (the rest belongs to a later call or a later message).
  /// Body bytes are appended to body().
  std::size_t feed(const char* data, std::size_t size);

  /// The stream ended (the peer closed). Completes a response whose body
  /// runs until close; anything else unfinished is an error.
  void finish();

  bool head_complete() const noexcept { return head_done_; }
  bool message_complete() const noexcept { return message_done_; }
  bool failed() const noexcept { return !error_.empty(); }
  /// Why parsing failed ("invalid character in header", "head larger than …").
  const std::string& error() const noexcept { return error_; }
  /// The head's status for an error: 431 when the head is too large, else 400.
  unsigned error_status() const noexcept { return head_too_large_ ? 431 : 400; }

  const http_head& head() const noexcept { return head_; }
  /// De-framed body bytes parsed so far and not yet taken.
  std::string& body() noexcept { return body_; }

  /// Bytes of head seen for the current message (for the cap).
  std::size_t head_bytes() const noexcept { return head_bytes_; }

private:
  static int on_message_begin(http_parser* p);
  static int on_url(http_parser* p, const char* at, std::size_t len);
  static int on_status(http_parser* p, const char* at, std::size_t len);
  static int on_header_field(http_parser* p, const char* at, std::size_t len);
  static int on_header_value(http_parser* p, const char* at, std::size_t len);
  static int on_headers_complete(http_parser* p);
  static int on_body(http_parser* p, const char* at, std::size_t len);
  static int on_message_complete(http_parser* p);

  bool count_head(std::size_t len);

  kind kind_;
  std::size_t max_head_bytes_;
  http_parser parser_{};
  http_parser_settings settings_{};
  http_head head_;
  std::string body_;
  std::string error_;
  std::size_t head_bytes_ = 0;
  bool head_done_ = false;
  bool message_done_ = false;
  bool in_value_ = false;
  bool no_body_ = false;
  bool head_too_large_ = false;
};

} // namespace castellan::proxy
