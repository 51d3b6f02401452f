/// @file token_command.cpp
/// `castellan token new`: a fresh bearer token for the API, and the
/// `[[tokens]]` entry of the tokens file that admits it (its hash only).

#include <cstdint>
#include <iostream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "actors/api/bearer_token.hpp"
#include "apps/castellan/cli_context.hpp"
#include "config/tokens_loader.hpp"

namespace castellan::cli {

namespace {

struct token_options {
  std::string name;
  std::vector<std::string> pools;
  bool pools_given = false;
  uint32_t max_concurrent = 0;
};

std::string toml_string(const std::string& s) {
  // Names are checked below to need no escaping; pool names too.
  return "\"" + s + "\"";
}

int run_token_new(const token_options& o) {
  auto token = api::make_token();
  if (!token) {
    std::cerr << "castellan token new: " << token.error().describe() << "\n";
    return usage_exit_code;
  }
  std::ostringstream entry;
  entry << "[[tokens]]\n";
  entry << "name = " << toml_string(o.name) << "\n";
  entry << "sha256 = \"" << api::to_hex(api::digest_of(*token)) << "\"\n";
  if (o.pools_given) {
    entry << "pools = [";
    for (std::size_t i = 0; i < o.pools.size(); ++i)
      entry << (i ? ", " : "") << toml_string(o.pools[i]);
    entry << "]\n";
  }
  if (o.max_concurrent != 0)
    entry << "max_concurrent = " << o.max_concurrent << "\n";
  // The entry is checked as the daemon would read it (name, pools, limit)
  // before the token is shown. Any pool name is fine here: the config the
  // file goes with checks them.
  auto check = config::parse_tokens_file(entry.str(), "<new token>", o.pools);
  if (!check.ok()) {
    for (const auto& e : check.errors)
      std::cerr << "castellan token new: " << e.key << ": " << e.value << ": " << e.message << "\n";
    return usage_exit_code;
  }
  std::cerr << "castellan: the new token (shown once; the daemon keeps only its hash):\n";
  std::cerr << *token << "\n";
  std::cout << entry.str() << std::flush;
  return 0;
}

} // namespace

void add_token_commands(CLI::App& app, cli_context& ctx) {
  auto* token = app.add_subcommand("token", "Bearer tokens of the API (docs/api.md)");
  token->require_subcommand(1);
  auto opts = std::make_shared<token_options>();
  auto* made = token->add_subcommand(
      "new", "Make a token: the token on stderr, once; the [[tokens]] entry to append to the "
             "tokens file on stdout");
  made->add_option("--name", opts->name, "Its name in logs (never the secret)")->required();
  auto* pools = made->add_option("--pools", opts->pools,
                                 "The pools it may use, comma-separated (default: all)")
                    ->delimiter(',');
  made->add_option("--max-concurrent", opts->max_concurrent,
                   "Its execs in flight at once (default: no per-token limit)")
      ->check(CLI::Range(uint32_t{1}, uint32_t{65536}));
  made->callback([opts, pools, &ctx] {
    opts->pools_given = pools->count() > 0;
    ctx.exit_code = run_token_new(*opts);
  });
}

} // namespace castellan::cli
