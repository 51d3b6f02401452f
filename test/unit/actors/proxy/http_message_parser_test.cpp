#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/proxy/http_message_parser.hpp"

using castellan::proxy::http_message_parser;

namespace {

std::size_t feed_all(http_message_parser& p, const std::string& s, std::size_t& pos) {
  std::size_t total = 0;
  while (pos < s.size() && !p.failed() && !p.message_complete()) {
    const std::size_t n = p.feed(s.data() + pos, s.size() - pos);
    pos += n;
    total += n;
    if (n == 0)
      break;
  }
  return total;
}

} // namespace

BOOST_AUTO_TEST_SUITE(proxy_http_parser)

BOOST_AUTO_TEST_CASE(stops_after_the_head_and_after_each_pipelined_message) {
  http_message_parser p(http_message_parser::kind::request, 4096);
  const std::string s = "GET http://a.test/x?y=1 HTTP/1.1\r\nHost: a.test\r\nX-A: 1\r\n\r\n"
                        "POST http://b.test/ HTTP/1.1\r\nHost: b.test\r\nContent-Length: 5\r\n\r\nhello";
  std::size_t pos = p.feed(s.data(), s.size());
  BOOST_TEST(p.head_complete());
  BOOST_TEST(!p.message_complete());
  BOOST_TEST(p.head().method == "GET");
  BOOST_TEST(p.head().target == "http://a.test/x?y=1");
  BOOST_TEST(*p.head().find("x-a") == "1");
  BOOST_TEST(p.head().keep_alive);
  feed_all(p, s, pos);
  BOOST_TEST(p.message_complete());
  BOOST_TEST(s.substr(pos, 4) == "POST"); // the next message stays unread
  p.reset();
  feed_all(p, s, pos);
  BOOST_TEST(p.head().method == "POST");
  BOOST_TEST(*p.head().content_length == 5u);
  BOOST_TEST(p.body() == "hello");
  BOOST_TEST(p.message_complete());
  BOOST_TEST(pos == s.size());
}

BOOST_AUTO_TEST_CASE(connect_leaves_the_tunnel_bytes_to_the_caller) {
  http_message_parser p(http_message_parser::kind::request, 4096);
  const std::string s = "CONNECT a.test:443 HTTP/1.1\r\nHost: a.test:443\r\n\r\n\x16\x03\x01";
  std::size_t pos = 0;
  feed_all(p, s, pos);
  BOOST_TEST(p.head().upgrade);
  BOOST_TEST(p.head().target == "a.test:443");
  BOOST_TEST(p.message_complete());
  BOOST_TEST(s.substr(pos) == "\x16\x03\x01");
}

BOOST_AUTO_TEST_CASE(chunked_bodies_arrive_deframed) {
  http_message_parser p(http_message_parser::kind::response, 4096);
  const std::string s = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                        "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  std::size_t pos = 0;
  feed_all(p, s, pos);
  BOOST_TEST(p.head().status == 200u);
  BOOST_TEST(p.head().reason == "OK");
  BOOST_TEST(p.head().chunked);
  feed_all(p, s, pos);
  BOOST_TEST(p.message_complete());
  BOOST_TEST(p.body() == "hello world");
}

BOOST_AUTO_TEST_CASE(a_response_without_length_runs_until_close) {
  http_message_parser p(http_message_parser::kind::response, 4096);
  const std::string s = "HTTP/1.0 200 OK\r\n\r\nsome bytes";
  std::size_t pos = 0;
  feed_all(p, s, pos);
  BOOST_TEST(p.head().body_until_close);
  feed_all(p, s, pos);
  BOOST_TEST(!p.message_complete());
  p.finish();
  BOOST_TEST(p.message_complete());
  BOOST_TEST(p.body() == "some bytes");
}

BOOST_AUTO_TEST_CASE(a_head_response_has_no_body) {
  http_message_parser p(http_message_parser::kind::response, 4096);
  p.expect_no_body(true);
  const std::string s = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n";
  std::size_t pos = 0;
  feed_all(p, s, pos);
  feed_all(p, s, pos);
  BOOST_TEST(p.message_complete());
}

BOOST_AUTO_TEST_CASE(an_oversized_head_is_431) {
  http_message_parser p(http_message_parser::kind::request, 256);
  const std::string s = "GET http://a.test/ HTTP/1.1\r\nX-Big: " + std::string(1000, 'x') + "\r\n\r\n";
  std::size_t pos = 0;
  feed_all(p, s, pos);
  BOOST_TEST(p.failed());
  BOOST_TEST(p.error_status() == 431u);
  BOOST_TEST(p.error().find("256") != std::string::npos, p.error());
}

BOOST_AUTO_TEST_CASE(malformed_and_smuggling_requests_are_400) {
  for (const std::string& s :
       {std::string("GET http://a.test/ HTTP/1.1\r\nBad Header\r\n\r\n"),
        std::string("G\x01T / HTTP/1.1\r\n\r\n"),
        std::string("POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
        std::string("POST http://a.test/ HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n")}) {
    http_message_parser p(http_message_parser::kind::request, 4096);
    std::size_t pos = 0;
    feed_all(p, s, pos);
    feed_all(p, s, pos);
    BOOST_TEST(p.failed(), s);
    BOOST_TEST(p.error_status() == 400u);
  }
}

BOOST_AUTO_TEST_SUITE_END()
