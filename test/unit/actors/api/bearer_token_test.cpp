// Bearer tokens: made from getrandom, hashed with SHA-256, compared in
// constant time, read from the Authorization header strictly.

#include <boost/test/unit_test.hpp>

#include <set>
#include <string>

#include "actors/api/bearer_token.hpp"

using namespace castellan::api;

BOOST_AUTO_TEST_SUITE(api_bearer_token)

BOOST_AUTO_TEST_CASE(made_tokens_are_prefixed_base64url_of_32_random_bytes) {
  std::set<std::string> seen;
  for (int i = 0; i < 100; ++i) {
    auto t = make_token();
    BOOST_TEST_REQUIRE(bool(t));
    BOOST_TEST(t->rfind("cst_", 0) == 0u);
    // 32 bytes in base64url without padding: 43 characters.
    BOOST_TEST(t->size() == 4u + 43u);
    for (char c : t->substr(4))
      BOOST_TEST(((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                  c == '-' || c == '_'),
                 *t);
    seen.insert(*t);
  }
  BOOST_TEST(seen.size() == 100u);
}

BOOST_AUTO_TEST_CASE(the_digest_is_sha256_of_the_whole_token) {
  // Known answers: SHA-256("") and SHA-256("abc").
  BOOST_TEST(to_hex(digest_of("")) ==
             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  BOOST_TEST(to_hex(digest_of("abc")) ==
             "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  auto d = digest_from_hex("BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD");
  BOOST_TEST_REQUIRE(d.has_value());
  BOOST_TEST(same_digest(*d, digest_of("abc")));
  BOOST_TEST(!same_digest(*d, digest_of("abd")));
  // Differing in the last byte only is still different.
  auto last = *d;
  last[31] ^= 1;
  BOOST_TEST(!same_digest(last, *d));
  BOOST_TEST(!digest_from_hex(std::string(63, 'a')).has_value());
  BOOST_TEST(!digest_from_hex(std::string(65, 'a')).has_value());
  BOOST_TEST(!digest_from_hex(std::string(63, 'a') + "g").has_value());
}

BOOST_AUTO_TEST_CASE(the_authorization_header_is_read_strictly) {
  BOOST_TEST(bearer_credentials("Bearer cst_abc").value_or("") == "cst_abc");
  BOOST_TEST(bearer_credentials("bearer cst_abc").value_or("") == "cst_abc");
  BOOST_TEST(bearer_credentials("BEARER   cst_abc  ").value_or("") == "cst_abc");
  BOOST_TEST(!bearer_credentials("Bearer").has_value());
  BOOST_TEST(!bearer_credentials("Bearer ").has_value());
  BOOST_TEST(!bearer_credentials("Bearercst_abc").has_value());
  BOOST_TEST(!bearer_credentials("Basic dXNlcjpwYXNz").has_value());
  BOOST_TEST(!bearer_credentials("Bearer a b").has_value());
  BOOST_TEST(!bearer_credentials("Bearer a,b").has_value());
  BOOST_TEST(!bearer_credentials(std::string("Bearer a\0b", 10)).has_value());
  BOOST_TEST(!bearer_credentials("Bearer a\tb").has_value());
}

BOOST_AUTO_TEST_SUITE_END()
