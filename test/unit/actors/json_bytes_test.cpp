// Bytes in JSON: which text is UTF-8, strict base64 both ways, and the
// result's output fields that use them.

#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(json_bytes_tests)

BOOST_AUTO_TEST_CASE(utf8_is_told_from_other_bytes) {
  BOOST_TEST(is_utf8(""));
  BOOST_TEST(is_utf8("plain ascii\n"));
  BOOST_TEST(is_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  BOOST_TEST(is_utf8(std::string("nul\0inside", 10)));
  BOOST_TEST(!is_utf8("\xff"));
  BOOST_TEST(!is_utf8("\xc3"));                 // cut short
  BOOST_TEST(!is_utf8("\xc0\xaf"));             // overlong '/'
  BOOST_TEST(!is_utf8("\xe0\x80\xaf"));         // overlong, three bytes
  BOOST_TEST(!is_utf8("\xed\xa0\x80"));         // a surrogate
  BOOST_TEST(!is_utf8("\xf4\x90\x80\x80"));     // above U+10FFFF
  BOOST_TEST(!is_utf8("\xe2\x82"));             // cut short
  BOOST_TEST(!is_utf8("\xe2\x28\xa1"));         // a bad continuation
  BOOST_TEST(is_utf8("\xf4\x8f\xbf\xbf"));      // U+10FFFF itself
}

BOOST_AUTO_TEST_CASE(base64_round_trips_every_length) {
  std::string bytes;
  for (int n = 0; n < 70; ++n) {
    auto text = base64_encode(bytes);
    BOOST_TEST(text.size() == 4 * ((bytes.size() + 2) / 3));
    auto back = base64_decode(text);
    BOOST_REQUIRE(back.has_value());
    BOOST_TEST(*back == bytes);
    bytes.push_back(static_cast<char>(n * 37 + 200));
  }
  BOOST_TEST(base64_encode("\xff\xfe") == "//4=");
}

BOOST_AUTO_TEST_CASE(base64_that_is_not_canonical_is_refused) {
  BOOST_TEST(!base64_decode("abc"));        // length
  BOOST_TEST(!base64_decode("ab c"));       // white space
  BOOST_TEST(!base64_decode("YW\nJj"));     // a line break
  BOOST_TEST(!base64_decode("YW=j"));       // padding inside
  BOOST_TEST(!base64_decode("Y==="));       // three padding characters
  BOOST_TEST(!base64_decode("YQ-_"));       // the URL alphabet
  BOOST_TEST(!base64_decode("YR=="));       // bits left over that are not zero
  BOOST_TEST(*base64_decode("YQ==") == "a");
  BOOST_TEST(*base64_decode("") == "");
}

BOOST_AUTO_TEST_CASE(output_that_is_not_utf8_comes_as_base64_with_its_flag) {
  exec_result r;
  r.stdout_data = "text \xc3\xa9\n";
  r.stderr_data.assign("\xff\x00\x01", 3);
  auto j = to_json(r);
  BOOST_TEST(j["stdout"] == "text \xc3\xa9\n");
  BOOST_TEST(j["stdout_base64"] == false);
  BOOST_TEST(j["stderr_base64"] == true);
  BOOST_TEST(*base64_decode(j["stderr"].get<std::string>()) == r.stderr_data);
}

BOOST_AUTO_TEST_CASE(output_cut_inside_a_character_stays_text) {
  BOOST_TEST(incomplete_utf8_tail("abc") == 0u);
  BOOST_TEST(incomplete_utf8_tail("a\xc3") == 1u);
  BOOST_TEST(incomplete_utf8_tail("a\xc3\xa9") == 0u);
  BOOST_TEST(incomplete_utf8_tail("a\xe2\x82") == 2u);
  BOOST_TEST(incomplete_utf8_tail("a\xf0\x9f\x98") == 3u);
  BOOST_TEST(incomplete_utf8_tail("\xf0\x9f\x98\x80") == 0u);
  BOOST_TEST(incomplete_utf8_tail("") == 0u);
  exec_result r;
  r.stdout_data = "caf\xc3\xa9 caf\xc3";
  r.stdout_truncated = true;
  auto j = to_json(r);
  BOOST_TEST(j["stdout_base64"] == false);
  BOOST_TEST(j["stdout"] == "caf\xc3\xa9 caf");
  // Not truncated: the same bytes are not text.
  r.stdout_truncated = false;
  BOOST_TEST(to_json(r)["stdout_base64"] == true);
}

BOOST_AUTO_TEST_SUITE_END()
