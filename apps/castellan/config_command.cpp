/// @file config_command.cpp
/// `castellan config check FILE`: load and check a daemon config the way
/// `castellan serve` does, and say what it would run.

#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "apps/castellan/cli_context.hpp"
#include "config/config_loader.hpp"

namespace castellan::cli {

namespace {

std::string plural(std::size_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

/// Prints the verdict on `file`; the exit code (0 valid, 1 invalid or unreadable).
int run_check(const std::string& file) {
  const auto loaded = config::load_serve_config(file);
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors)
      std::cerr << e.describe() << '\n';
    std::cerr << file << ": " << plural(loaded.errors.size(), "error") << '\n';
    return 1;
  }
  std::cout << file << ": ok";
  if (!loaded.warnings.empty())
    std::cout << ", " << plural(loaded.warnings.size(), "warning");
  std::cout << '\n';
  for (const auto& w : loaded.warnings) {
    auto warning = w;
    warning.message = "warning: " + warning.message;
    std::cout << warning.describe() << '\n';
  }
  for (const auto& p : loaded.config.pools)
    std::cout << "pool " << p.spec.name << ": policy " << p.policy << ", size " << p.spec.size
              << ", mode " << to_string(p.spec.mode) << '\n';
  return 0;
}

} // namespace

void add_config_commands(CLI::App& app, cli_context& ctx) {
  CLI::App* config = app.add_subcommand("config", "Check the daemon's configuration");
  config->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* check = config->add_subcommand(
      "check", "Load and check a castellan.toml; list its pools, or every error");
  check->add_option("file", *file, "The config file")->required();
  check->callback([file, &ctx] { ctx.exit_code = run_check(*file); });
}

} // namespace castellan::cli
