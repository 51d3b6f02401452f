#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/api/listen_address.hpp"

using namespace castellan::api;

namespace {

/// The failure message of parsing `text` (the test fails if it parses).
std::string refusal(const std::string& text) {
  auto r = parse_listen_address(text);
  BOOST_REQUIRE_MESSAGE(!r, "'" << text << "' parsed");
  return r.error().describe();
}

bool mentions(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

BOOST_AUTO_TEST_SUITE(api_listen_address)

BOOST_AUTO_TEST_CASE(unix_paths) {
  auto a = parse_listen_address("unix:/run/castellan/castellan.sock");
  BOOST_REQUIRE(a);
  BOOST_TEST((a->type == listen_address::kind::unix_socket));
  BOOST_TEST(a->path == "/run/castellan/castellan.sock");
  BOOST_TEST(a->to_string() == "unix:/run/castellan/castellan.sock");

  BOOST_TEST(mentions(refusal("unix:"), "path is empty"));
  BOOST_TEST(mentions(refusal("unix:run/x.sock"), "'run/x.sock' is not absolute"));
  BOOST_TEST(mentions(refusal("unix:/tmp/dir/"), "names a directory"));
  BOOST_TEST(mentions(refusal("unix:/" + std::string(107, 'a')), "108 bytes long; at most 107"));
  BOOST_TEST(parse_listen_address("unix:/" + std::string(106, 'a')).has_value());
  BOOST_TEST(mentions(refusal(std::string("unix:/a\0b", 9)), "NUL"));
}

BOOST_AUTO_TEST_CASE(tcp_hosts_and_ports) {
  auto a = parse_listen_address("tcp:127.0.0.1:8080");
  BOOST_REQUIRE(a);
  BOOST_TEST((a->type == listen_address::kind::tcp));
  BOOST_TEST(a->host == "127.0.0.1");
  BOOST_TEST(a->port == 8080);
  BOOST_TEST(a->to_string() == "tcp:127.0.0.1:8080");

  BOOST_TEST(!a->tls);
  auto t = parse_listen_address("tls:0.0.0.0:8443");
  BOOST_REQUIRE(t);
  BOOST_TEST((t->type == listen_address::kind::tcp));
  BOOST_TEST(t->tls);
  BOOST_TEST(t->to_string() == "tls:0.0.0.0:8443");
  auto t6 = parse_listen_address("tls:[::]:443");
  BOOST_REQUIRE(t6);
  BOOST_TEST(t6->to_string() == "tls:[::]:443");
  BOOST_TEST(mentions(refusal("tls:127.0.0.1"), "no ':PORT'"));

  auto v6 = parse_listen_address("tcp:[::1]:0");
  BOOST_REQUIRE(v6);
  BOOST_TEST(v6->host == "::1");
  BOOST_TEST(v6->port == 0);
  BOOST_TEST(v6->to_string() == "tcp:[::1]:0");

  auto name = parse_listen_address("tcp:localhost:65535");
  BOOST_REQUIRE(name);
  BOOST_TEST(name->port == 65535);

  BOOST_TEST(mentions(refusal("tcp:127.0.0.1"), "no ':PORT'"));
  BOOST_TEST(mentions(refusal("tcp::80"), "host is empty"));
  BOOST_TEST(mentions(refusal("tcp:127.0.0.1:"), "port is empty"));
  BOOST_TEST(mentions(refusal("tcp:127.0.0.1:65536"), "'65536' is not a number from 0 to 65535"));
  BOOST_TEST(mentions(refusal("tcp:127.0.0.1:8o"), "'8o' is not a number"));
  BOOST_TEST(mentions(refusal("tcp:127.0.0.1:-1"), "'-1' is not a number"));
  BOOST_TEST(mentions(refusal("tcp:::1:80"), "write an IPv6 host in brackets"));
  BOOST_TEST(mentions(refusal("tcp:[::1:80"), "no closing ']'"));
  BOOST_TEST(mentions(refusal("tcp:[::1]80"), "no ':PORT' after the host '[::1]'"));
  BOOST_TEST(mentions(refusal("tcp:[hello]:80"), "'[hello]' is not an IPv6 address"));
  BOOST_TEST(mentions(refusal("tcp:exa mple:80"), "'exa mple' is not an address or a name"));
}

BOOST_AUTO_TEST_CASE(unknown_schemes) {
  BOOST_TEST(mentions(refusal("http://127.0.0.1:80"), "scheme is not 'unix:', 'tcp:' or 'tls:'"));
  BOOST_TEST(mentions(refusal("/run/castellan.sock"), "listen address '/run/castellan.sock'"));
  BOOST_TEST(mentions(refusal(""), "scheme"));
}

BOOST_AUTO_TEST_SUITE_END()
