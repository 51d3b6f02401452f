// Random, truncated and mutated TOML never crashes or hangs the loader: it
// answers every input with a config or with errors.

#include <boost/test/unit_test.hpp>

#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "config/config_loader.hpp"
#include "config_files.hpp"
#include "support/build_paths.hpp"

using namespace castellan;

BOOST_AUTO_TEST_SUITE(config_robustness)

BOOST_AUTO_TEST_CASE(random_truncated_and_mutated_inputs) {
  std::ifstream in{test::source_dir() + "/config/castellan.toml", std::ios::binary};
  std::stringstream s;
  s << in.rdbuf();
  // A seed that sets many keys, so that mutations reach every reader.
  const std::string seed =
      "listen = [\"unix:/tmp/a.sock\", \"tcp:127.0.0.1:8080\"]\n" + test::source_policies() +
      s.str() +
      "[[pools]]\nname = \"b\"\npolicy = \"strict\"\nsize = 2\nmode = \"shared\"\n"
      "limits = { memory = \"128MiB\", pids = 8, code = 4096 }\n"
      "[audit]\nevents = [\"exec_start\", \"openat\"]\nmax_bytes = \"1GiB\"\n"
      "[request_policies]\nbindable_paths = [\"/srv\"]\n";
  std::mt19937_64 rng{20261126};
  const std::string alphabet = "[]{}=\"'#.,\n \t\\0123456789aefilnorstux-_:/KMGiB\x01\xff";
  std::size_t ok = 0, refused = 0;
  auto check = [&](const std::string& text) {
    auto l = config::parse_serve_config(text, "fuzz.toml", "/nonexistent");
    (l.ok() ? ok : refused)++;
    for (const auto& e : l.errors)
      BOOST_TEST_REQUIRE(!e.message.empty());
  };
  for (int i = 0; i < 1500; ++i) { // truncations
    const auto cut = std::uniform_int_distribution<std::size_t>(0, seed.size())(rng);
    check(seed.substr(0, cut));
  }
  for (int i = 0; i < 1500; ++i) { // mutations: replace, insert, delete a few bytes
    std::string t = seed;
    const int edits = std::uniform_int_distribution<int>(1, 8)(rng);
    for (int e = 0; e < edits && !t.empty(); ++e) {
      const auto at = std::uniform_int_distribution<std::size_t>(0, t.size() - 1)(rng);
      const char c =
          alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
      switch (std::uniform_int_distribution<int>(0, 2)(rng)) {
      case 0:
        t[at] = c;
        break;
      case 1:
        t.insert(t.begin() + static_cast<std::ptrdiff_t>(at), c);
        break;
      default:
        t.erase(at, 1);
      }
    }
    check(t);
  }
  for (int i = 0; i < 1000; ++i) { // noise
    std::string t(std::uniform_int_distribution<std::size_t>(0, 200)(rng), '\0');
    for (auto& c : t)
      c = alphabet[std::uniform_int_distribution<std::size_t>(0, alphabet.size() - 1)(rng)];
    check(t);
  }
  BOOST_TEST_MESSAGE(ok << " inputs loaded, " << refused << " refused");
  // Both outcomes were reached: the mutations neither all broke the syntax
  // nor all missed the checks.
  BOOST_TEST(ok > 0u);
  BOOST_TEST(refused > 0u);
}

BOOST_AUTO_TEST_CASE(deeply_dotted_keys_are_refused_before_the_parser_recurses) {
  // toml++ recurses over the tables a dotted key makes: 100,000 levels
  // overflow the stack. The loader refuses more than 32 dots per key.
  auto chain = [](std::size_t dots) {
    std::string key = "a";
    for (std::size_t i = 0; i < dots; ++i)
      key += ".a";
    return key;
  };
  for (const std::string& text :
       {chain(100000) + " = 1\n", "[" + chain(100000) + "]\n", "[[" + chain(100000) + "]]\n",
        "x = {" + chain(100000) + " = 1}\n", "\"q\"" + std::string(100000, '.') + " = 1\n",
        "[pools.limits]\n" + chain(33) + " = 1\n"}) {
    auto l = config::parse_serve_config(text, "deep.toml", "/nonexistent");
    BOOST_TEST_REQUIRE(l.errors.size() == 1u);
    BOOST_TEST(l.errors[0].message == "a key nested deeper than 33 levels (more than 32 dots)");
  }
  auto at = config::parse_serve_config("\n\n  " + chain(40) + " = 1\n", "deep.toml", "/x");
  BOOST_TEST_REQUIRE(at.errors.size() == 1u);
  BOOST_TEST(at.errors[0].describe() ==
             "deep.toml:3:68: a key nested deeper than 33 levels (more than 32 dots)");
  // 32 dots reach the loader (which knows no such key); dots in strings,
  // comments and floats are not keys.
  auto shallow = config::parse_serve_config(chain(32) + " = 1\n", "deep.toml", "/nonexistent");
  BOOST_TEST_REQUIRE(shallow.errors.size() == 1u);
  BOOST_TEST(shallow.errors[0].message.find("unknown key") == 0u, shallow.errors[0].message);
  std::string floats = "x = [";
  for (int i = 0; i < 1000; ++i)
    floats += "1.5, ";
  floats += "2.5]\n";
  const std::string many(5000, '.');
  for (const std::string& text :
       {"state_dir = \"/x/" + many + "\"\n", "state_dir = '''\n" + many + "'''\n",
        "state_dir = \"\"\"a\\\"" + many + "\"\"\"\n", "state_dir = '" + many + "'\n",
        "# " + many + "\n", floats}) {
    auto l = config::parse_serve_config(text, "flat.toml", "/nonexistent");
    for (const auto& e : l.errors)
      BOOST_TEST(e.message.find("nested deeper") == std::string::npos, e.describe());
  }
}

BOOST_AUTO_TEST_SUITE_END()
