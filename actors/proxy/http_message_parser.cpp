/// @file http_message_parser.cpp
/// The http_parser wrapper (see http_message_parser.hpp).

#include "actors/proxy/http_message_parser.hpp"

#include <cstring>

namespace castellan::proxy {

namespace {

char lower(char c) noexcept {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

http_message_parser& self_of(http_parser* p) noexcept {
  return *static_cast<http_message_parser*>(p->data);
}

} // namespace

bool iequals(std::string_view a, std::string_view b) noexcept {
  if (a.size() != b.size())
    return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (lower(a[i]) != lower(b[i]))
      return false;
  return true;
}

const std::string* http_head::find(std::string_view name) const noexcept {
  for (const auto& [k, v] : headers)
    if (iequals(k, name))
      return &v;
  return nullptr;
}

http_message_parser::http_message_parser(kind k, std::size_t max_head_bytes)
  : kind_(k), max_head_bytes_(max_head_bytes) {
  settings_.on_message_begin = &on_message_begin;
  settings_.on_url = &on_url;
  settings_.on_status = &on_status;
  settings_.on_header_field = &on_header_field;
  settings_.on_header_value = &on_header_value;
  settings_.on_headers_complete = &on_headers_complete;
  settings_.on_body = &on_body;
  settings_.on_message_complete = &on_message_complete;
  reset();
}

void http_message_parser::reset() {
  http_parser_init(&parser_, kind_ == kind::request ? HTTP_REQUEST : HTTP_RESPONSE);
  parser_.data = this;
  head_ = http_head{};
  body_.clear();
  error_.clear();
  head_bytes_ = 0;
  head_done_ = false;
  message_done_ = false;
  in_value_ = false;
  head_too_large_ = false;
}

bool http_message_parser::count_head(std::size_t len) {
  head_bytes_ += len;
  if (head_bytes_ <= max_head_bytes_)
    return true;
  head_too_large_ = true;
  error_ = "head larger than " + std::to_string(max_head_bytes_) + " bytes";
  return false;
}

std::size_t http_message_parser::feed(const char* data, std::size_t size) {
  if (failed() || message_done_ || size == 0)
    return 0;
  if (HTTP_PARSER_ERRNO(&parser_) == HPE_PAUSED)
    http_parser_pause(&parser_, 0);
  const std::size_t before = head_bytes_;
  std::size_t n = http_parser_execute(&parser_, &settings_, data, size);
  const auto err = HTTP_PARSER_ERRNO(&parser_);
  if (err != HPE_OK && err != HPE_PAUSED) {
    if (error_.empty())
      error_ = http_errno_description(err);
    return n;
  }
  if (!head_done_) {
    // Bytes of the request line, the header names and values are counted
    // by the callbacks; this catches the rest (separators, line ends).
    const std::size_t counted = head_bytes_ - before;
    if (n > counted && !count_head(n - counted))
      return n;
  }
  // CONNECT (or an upgrade): on_message_complete fires right after the
  // head and the parser leaves everything after it to the caller.
  // A paused parser reports the offset it stopped at; resuming from there
  // continues the same message.
  return n;
}

void http_message_parser::finish() {
  if (failed() || message_done_)
    return;
  if (HTTP_PARSER_ERRNO(&parser_) == HPE_PAUSED)
    http_parser_pause(&parser_, 0);
  http_parser_execute(&parser_, &settings_, nullptr, 0);
  if (!message_done_ && error_.empty())
    error_ = head_done_ ? "the connection closed in the middle of the body"
                        : "the connection closed in the middle of the head";
}

int http_message_parser::on_message_begin(http_parser*) {
  return 0;
}

int http_message_parser::on_url(http_parser* p, const char* at, std::size_t len) {
  auto& s = self_of(p);
  if (!s.count_head(len))
    return 1;
  s.head_.target.append(at, len);
  return 0;
}

int http_message_parser::on_status(http_parser* p, const char* at, std::size_t len) {
  auto& s = self_of(p);
  if (!s.count_head(len))
    return 1;
  s.head_.reason.append(at, len);
  return 0;
}

int http_message_parser::on_header_field(http_parser* p, const char* at, std::size_t len) {
  auto& s = self_of(p);
  if (!s.count_head(len))
    return 1;
  if (s.in_value_ || s.head_.headers.empty()) {
    if (s.head_.headers.size() >= 256) {
      s.error_ = "more than 256 header fields";
      s.head_too_large_ = true;
      return 1;
    }
    s.head_.headers.emplace_back();
    s.in_value_ = false;
  }
  s.head_.headers.back().first.append(at, len);
  return 0;
}

int http_message_parser::on_header_value(http_parser* p, const char* at, std::size_t len) {
  auto& s = self_of(p);
  if (!s.count_head(len))
    return 1;
  if (s.head_.headers.empty())
    s.head_.headers.emplace_back();
  s.in_value_ = true;
  s.head_.headers.back().second.append(at, len);
  return 0;
}

int http_message_parser::on_headers_complete(http_parser* p) {
  auto& s = self_of(p);
  auto& h = s.head_;
  h.major = p->http_major;
  h.minor = p->http_minor;
  if (s.kind_ == kind::request)
    h.method = http_method_str(static_cast<http_method>(p->method));
  else
    h.status = p->status_code;
  h.keep_alive = http_should_keep_alive(p) != 0;
  h.chunked = (p->flags & F_CHUNKED) != 0;
  if ((p->flags & F_CONTENTLENGTH) != 0)
    h.content_length = p->content_length;
  h.upgrade = p->method == HTTP_CONNECT && s.kind_ == kind::request;
  s.head_done_ = true;
  const bool skip_body = s.kind_ == kind::response && s.no_body_;
  if (s.kind_ == kind::response && !skip_body && !h.chunked && !h.content_length &&
      h.status / 100 != 1 && h.status != 204 && h.status != 304)
    h.body_until_close = true;
  // Stop here: the caller decides before any body byte is read.
  http_parser_pause(p, 1);
  return skip_body ? 1 : 0;
}

int http_message_parser::on_body(http_parser* p, const char* at, std::size_t len) {
  self_of(p).body_.append(at, len);
  return 0;
}

int http_message_parser::on_message_complete(http_parser* p) {
  auto& s = self_of(p);
  s.message_done_ = true;
  // Stop here: pipelined bytes after this message stay unread.
  http_parser_pause(p, 1);
  return 0;
}

} // namespace castellan::proxy
