#include <boost/test/unit_test.hpp>

#include <string>

#include "actors/session/workspace_name.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(workspace_name_tests)

BOOST_AUTO_TEST_CASE(accepts_lowercase_digits_dots_dashes_and_underscores) {
  for (const char* name : {"a", "0", "notebook-1", "my_ws.v2", "x..y"})
    BOOST_TEST(static_cast<bool>(validate_workspace_name(name)), name);
  BOOST_TEST(static_cast<bool>(validate_workspace_name(std::string(63, 'a'))));
}

BOOST_AUTO_TEST_CASE(refuses_paths_dots_long_names_and_other_characters_and_says_why) {
  auto why = [](const std::string& name) {
    auto r = validate_workspace_name(name);
    BOOST_TEST(!r, name);
    return r ? std::string() : r.error().message;
  };
  BOOST_TEST(why("a/b").find("contains '/'") != std::string::npos);
  BOOST_TEST(why("/etc").find("starts with '/'") != std::string::npos);
  BOOST_TEST(why("..").find("starts with '.'") != std::string::npos);
  BOOST_TEST(why(".").find("starts with '.'") != std::string::npos);
  BOOST_TEST(why("../x").find("starts with '.'") != std::string::npos);
  BOOST_TEST(why("-rf").find("starts with '-'") != std::string::npos);
  BOOST_TEST(why("").find("empty") != std::string::npos);
  BOOST_TEST(why(std::string(64, 'a')).find("64 characters long") != std::string::npos);
  BOOST_TEST(why("Upper").find("starts with 'U'") != std::string::npos);
  BOOST_TEST(why("a b").find("contains ' '") != std::string::npos);
  BOOST_TEST(why(std::string("a\0b", 3)).find("contains '\\x0'") != std::string::npos);
  BOOST_TEST(why("a\nb").find("1 to 63 of a-z 0-9") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
