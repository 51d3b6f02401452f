/// @file main.cpp
/// `castellan`: the command-line front end. Each subcommand lives in its own
/// file and registers itself here.

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include "apps/castellan/cli_context.hpp"

int main(int argc, char** argv) {
  // First: `--timeout` counts from here.
  castellan::cli::cli_context ctx;
  // Diagnostics go to stderr: stdout carries only the code's output or the
  // --json result, so that it stays parseable.
  spdlog::set_default_logger(spdlog::stderr_color_mt("castellan"));
  // A one-shot command's stderr is the code's stderr: housekeeping of its
  // embedded supervisor (a stale cgroup of a killed supervisor reclaimed)
  // is no part of it. Warnings and errors still show; `serve` logs info.
  spdlog::set_level(spdlog::level::warn);
  CLI::App app{"castellan: run untrusted code in warm, sandboxed workers"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "castellan 0.1.0");
  castellan::cli::add_exec_commands(app, ctx);
  castellan::cli::add_policy_commands(app, ctx);
  castellan::cli::add_audit_commands(app, ctx);
  castellan::cli::add_serve_command(app, ctx);
  castellan::cli::add_config_commands(app, ctx);
  castellan::cli::add_token_commands(app, ctx);
  castellan::cli::add_session_commands(app, ctx);
  castellan::cli::add_workspace_commands(app, ctx);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 prints help and errors itself; castellan's own errors exit 2.
    const int rc = app.exit(e);
    return rc == 0 ? 0 : castellan::cli::usage_exit_code;
  }
  return ctx.exit_code;
}
