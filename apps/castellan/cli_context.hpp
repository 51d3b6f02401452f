#pragma once

/// @file cli_context.hpp
/// What the `castellan` subcommands share: each `add_*_commands` registers its
/// subcommands on the app, and their callbacks set `exit_code`.

#include <chrono>
#include <string>

namespace CLI {
class App;
}

namespace castellan::cli {

/// castellan's own failures (bad flags, no interpreter, unreadable files) exit
/// with this code; the executed code's exit code is passed through otherwise.
inline constexpr int usage_exit_code = 2;

struct cli_context {
  int exit_code = 0;
  /// When the command started (made first thing in main): `--timeout`
  /// counts from here.
  std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
};

/// `castellan exec`, `castellan run`, `castellan status` (apps/castellan/exec_command.cpp).
void add_exec_commands(CLI::App& app, cli_context& ctx);
/// `castellan policy check|merge|explain|init` (apps/castellan/policy_command.cpp).
void add_policy_commands(CLI::App& app, cli_context& ctx);
/// `castellan audit tail` (apps/castellan/audit_command.cpp).
void add_audit_commands(CLI::App& app, cli_context& ctx);
/// `castellan serve` (apps/castellan/serve_command.cpp).
void add_serve_command(CLI::App& app, cli_context& ctx);
/// `castellan config check` (apps/castellan/config_command.cpp).
void add_config_commands(CLI::App& app, cli_context& ctx);
/// `castellan token new` (apps/castellan/token_command.cpp).
void add_token_commands(CLI::App& app, cli_context& ctx);
/// `castellan session create|exec|run|ls|stats|rm` (apps/castellan/session_command.cpp).
void add_session_commands(CLI::App& app, cli_context& ctx);
/// `castellan workspace ls|create|rm` (apps/castellan/workspace_command.cpp).
void add_workspace_commands(CLI::App& app, cli_context& ctx);

} // namespace castellan::cli
