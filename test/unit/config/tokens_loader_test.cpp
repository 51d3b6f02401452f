// The tokens file: its entries as the API uses them, and every error with
// its place, key path and value, as the config loader reports its own.

#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "actors/api/bearer_token.hpp"
#include "config/tokens_loader.hpp"

using namespace castellan;

namespace {

const std::vector<std::string> pools = {"default", "gpu"};
const std::string hex_a(64, 'a');
const std::string hex_b(64, 'B');

std::vector<std::string> errors_of(const std::string& text) {
  auto l = config::parse_tokens_file(text, "tokens.toml", pools);
  std::vector<std::string> out;
  for (const auto& e : l.errors)
    out.push_back(e.describe());
  BOOST_TEST(l.tokens.empty(), "a file with errors gives no tokens");
  return out;
}

std::string only_error(const std::string& text) {
  auto e = errors_of(text);
  BOOST_TEST_REQUIRE(e.size() == 1u, text);
  return e[0];
}

/// A private directory, removed afterwards.
struct temp_dir {
  std::string path;
  temp_dir() {
    char tmpl[] = "/tmp/castellan-tokens-XXXXXX";
    BOOST_REQUIRE(::mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~temp_dir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

} // namespace

BOOST_AUTO_TEST_SUITE(tokens_loader)

BOOST_AUTO_TEST_CASE(entries_become_tokens) {
  auto l = config::parse_tokens_file("[[tokens]]\nname = \"ci\"\nsha256 = \"" + hex_a +
                                         "\"\npools = [\"default\"]\nmax_concurrent = 8\n\n"
                                         "[[tokens]]\nname = \"ops@example\"\nsha256 = \"" +
                                         hex_b + "\"\n",
                                     "tokens.toml", pools);
  BOOST_TEST_REQUIRE(l.ok());
  BOOST_TEST_REQUIRE(l.tokens.size() == 2u);
  BOOST_TEST(l.tokens[0].name == "ci");
  BOOST_TEST(api::to_hex(l.tokens[0].sha256) == hex_a);
  BOOST_TEST((l.tokens[0].pools == std::vector<std::string>{"default"}));
  BOOST_TEST(l.tokens[0].max_concurrent == 8u);
  BOOST_TEST(l.tokens[1].name == "ops@example");
  // Upper-case hex is read; the digest is the same either way.
  BOOST_TEST(api::to_hex(l.tokens[1].sha256) == std::string(64, 'b'));
  BOOST_TEST(!l.tokens[1].pools.has_value(), "absent pools: all");
  BOOST_TEST(l.tokens[1].max_concurrent == 0u, "absent: no per-token limit");
  // An empty file is no token at all: TCP then admits nobody.
  auto empty = config::parse_tokens_file("", "tokens.toml", pools);
  BOOST_TEST(empty.ok());
  BOOST_TEST(empty.tokens.empty());
  // An empty allowlist: a token that may use no pool.
  auto none = config::parse_tokens_file(
      "[[tokens]]\nname = \"r\"\nsha256 = \"" + hex_a + "\"\npools = []\n", "tokens.toml", pools);
  BOOST_TEST_REQUIRE(none.ok());
  BOOST_TEST(none.tokens[0].pools->empty());
}

BOOST_AUTO_TEST_CASE(every_error_with_its_place) {
  const std::string text = "[[tokens]]\n"                                  // 1
                           "name = \"ci\"\n"                               // 2
                           "sha256 = \"abc\"\n"                            // 3
                           "pools = [\"default\", \"cpu\", \"default\"]\n" // 4
                           "max_concurrent = 0\n"                          // 5
                           "secret = \"cst_x\"\n"                          // 6
                           "\n"                                            // 7
                           "[[tokens]]\n"                                  // 8
                           "name = \"ci\"\n"                               // 9
                           "sha256 = \"" +
                           hex_a +
                           "\"\n"                     // 10
                           "max_concurrent = \"8\"\n" // 11
                           "\n"                       // 12
                           "[[tokens]]\n"             // 13
                           "name = \"with space\"\n"  // 14
                           "sha256 = \"" +
                           hex_a +
                           "\"\n"              // 15
                           "pools = \"gpu\"\n" // 16
                           "\n"                // 17
                           "[[tokens]]\n"      // 18
                           "\n"                // 19
                           "[extra]\n";        // 20
  const std::vector<std::string> expected = {
      "tokens.toml:3:10: tokens[0].sha256: \"abc\": must be the token's SHA-256 as 64 hex digits "
      "(castellan token new prints it)",
      "tokens.toml:4:21: tokens[0].pools[1]: \"cpu\": no pool of that name in the config (its "
      "pools: \"default\", \"gpu\")",
      "tokens.toml:4:28: tokens[0].pools[2]: \"default\": listed twice",
      "tokens.toml:5:18: tokens[0].max_concurrent: 0: must be between 1 and 65536 (leave it out "
      "for no per-token limit)",
      "tokens.toml:6:1: tokens[0].secret: \"cst_x\": unknown key (allowed here: name, sha256, "
      "pools, max_concurrent)",
      "tokens.toml:9:8: tokens[1].name: \"ci\": token name already used by tokens[0] (line 2)",
      "tokens.toml:11:18: tokens[1].max_concurrent: \"8\": must be an integer, not a string",
      "tokens.toml:14:8: tokens[2].name: \"with space\": a token name has 1 to 64 letters, digits, "
      "'_', '-', '.' or '@'",
      "tokens.toml:15:10: tokens[2].sha256: \"" + hex_a +
          "\": the same token as tokens[1] (line 10)",
      "tokens.toml:16:9: tokens[2].pools: \"gpu\": must be an array of pool names, not a string",
      "tokens.toml:18:1: tokens[3].name: missing: every token needs a name",
      "tokens.toml:18:1: tokens[3].sha256: missing: every token needs the sha256 of its secret",
      "tokens.toml:20:2: extra: {…}: unknown key (a tokens file has only [[tokens]] tables)",
  };
  auto got = errors_of(text);
  std::sort(got.begin(), got.end(), [](const std::string& a, const std::string& b) {
    // By line, then column, as the config loader lists its errors.
    auto num = [](const std::string& s, std::size_t from) {
      return std::stoul(s.substr(from, s.find(':', from) - from));
    };
    const auto la = num(a, 12), lb = num(b, 12);
    if (la != lb)
      return la < lb;
    return num(a, a.find(':', 12) + 1) < num(b, b.find(':', 12) + 1);
  });
  BOOST_TEST(got == expected, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(syntax_errors_and_wrong_shapes) {
  BOOST_TEST(only_error("[[tokens]\n").rfind("tokens.toml:1:", 0) == 0u);
  BOOST_TEST(
      only_error("tokens = 3\n") ==
      "tokens.toml:1:10: tokens: 3: must be an array of tables ([[tokens]]), not an integer");
  BOOST_TEST(only_error("tokens = [1]\n") ==
             "tokens.toml:1:11: tokens[0]: 1: must be a table, not an integer");
  // A dotted key deep enough to overflow toml++'s recursion is refused
  // before the parser sees it, as in castellan.toml.
  std::string deep = "a";
  for (int i = 0; i < 100000; ++i)
    deep += ".a";
  BOOST_TEST(only_error(deep + " = 1\n").find("nested deeper") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_an_error_not_an_empty_list) {
  auto l = config::load_tokens_file("/nonexistent/tokens.toml", pools);
  BOOST_TEST_REQUIRE(l.errors.size() == 1u);
  BOOST_TEST(l.errors[0].describe() ==
             "/nonexistent/tokens.toml: cannot read: No such file or directory");
}

// The config loader checks the file's type and mode by its path before it
// reads it; a file swapped in between must meet the same checks where it
// is read, on the descriptor.
BOOST_AUTO_TEST_CASE(the_file_read_is_checked_not_only_the_path_stat_saw) {
  temp_dir dir;
  const std::string file = dir.path + "/tokens.toml";
  std::ofstream(file) << "[[tokens]]\nname = \"a\"\nsha256 = \"" + hex_a + "\"\n";
  BOOST_REQUIRE(::chmod(file.c_str(), 0644) == 0);
  auto l = config::load_tokens_file(file, pools);
  BOOST_TEST(l.tokens.empty());
  BOOST_TEST_REQUIRE(l.errors.size() == 1u);
  BOOST_TEST(l.errors[0].describe() ==
             file + ": mode 0644 lets others than its owner use it (chmod 600)");
}

// A FIFO in the file's place must not hold the reader (the daemon's signal
// thread on SIGHUP) until some writer comes. The writer here only ends the
// wait of a reader that blocks, so that such a reader fails the test
// instead of hanging it.
BOOST_AUTO_TEST_CASE(a_fifo_is_refused_without_waiting_for_a_writer) {
  temp_dir dir;
  const std::string fifo = dir.path + "/tokens.toml";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  std::atomic<bool> done{false};
  std::thread writer([&] {
    while (!done) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd >= 0)
        ::close(fd);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  auto l = config::load_tokens_file(fifo, pools);
  done = true;
  writer.join();
  BOOST_TEST_REQUIRE(l.errors.size() == 1u);
  BOOST_TEST(l.errors[0].describe() == fifo + ": not a regular file");
}

BOOST_AUTO_TEST_SUITE_END()
