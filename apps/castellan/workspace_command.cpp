/// @file workspace_command.cpp
/// `castellan workspace ls|create|rm`: the caller's workspaces on a running
/// daemon (docs/api.md, "Workspaces"), through its API, found as the
/// session commands find it.

#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/exec_json.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/daemon_client.hpp"
#include "apps/castellan/remote_exec.hpp"
#include "config/byte_size.hpp"

namespace castellan::cli {

namespace {

using json = nlohmann::json;

struct workspace_flags {
  std::string connect;
  bool json = false;
  std::string name;
  std::string quota;
};

/// The daemon to talk to, or "" having said why there is none.
std::string target_of(const workspace_flags& f) {
  std::string target = daemon_target(f.connect);
  if (target.empty())
    std::cerr << "castellan workspace: no daemon to ask: give --connect (or CASTELLAN_CONNECT), "
                 "or set XDG_RUNTIME_DIR to find the default socket\n";
  return target;
}

/// A name that stays one path segment of the URL.
bool valid_name(const std::string& name) {
  if (name.empty() || name.size() > 63 || name == "." || name == "..")
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

std::string line_of(const json& w) {
  auto num = [&](const char* key) {
    return w.contains(key) ? w[key].dump() : std::string("?");
  };
  return w.value("name", std::string("?")) + "  quota_bytes=" + num("quota_bytes") +
         "  used_bytes=" + num("used_bytes") + "  users=" + num("users");
}

int list(const workspace_flags& f) {
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, "GET", "/v1/workspaces");
  if (a.exit_code != 0)
    return a.exit_code;
  if (f.json) {
    std::cout << dump_json(a.body) << "\n";
    return 0;
  }
  if (!a.body.contains("workspaces") || !a.body["workspaces"].is_array()) {
    std::cerr << "castellan: the daemon's answer is unreadable: no workspaces\n";
    return usage_exit_code;
  }
  for (const auto& w : a.body["workspaces"])
    std::cout << line_of(w) << "\n";
  return 0;
}

int create(const workspace_flags& f) {
  json body = {{"name", f.name}};
  if (!f.quota.empty()) {
    const auto size = config::parse_byte_size(f.quota);
    if (!size.error.empty() || size.bytes == 0) {
      std::cerr << "castellan workspace create: --quota: '" << f.quota
                << "' is not a size (e.g. 64MiB, 1GiB)\n";
      return usage_exit_code;
    }
    body["quota_bytes"] = size.bytes;
  }
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, "POST", "/v1/workspaces", dump_json(body));
  if (a.exit_code != 0)
    return a.exit_code;
  if (f.json)
    std::cout << dump_json(a.body) << "\n";
  return 0;
}

int remove(const workspace_flags& f) {
  if (!valid_name(f.name)) {
    std::cerr << "castellan workspace rm: '" << f.name << "' is not a workspace name\n";
    return usage_exit_code;
  }
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, "DELETE", "/v1/workspaces/" + f.name);
  if (a.exit_code != 0)
    return a.exit_code;
  if (f.json)
    std::cout << dump_json(a.body) << "\n";
  return 0;
}

void add_common(CLI::App* cmd, workspace_flags& f) {
  cmd->add_option("--connect", f.connect,
                  "The daemon: unix:PATH, http://HOST:PORT or https://HOST:PORT (default: "
                  "$CASTELLAN_CONNECT, else the socket `castellan serve` listens on by default; "
                  "$CASTELLAN_TOKEN is sent as the bearer token)");
  cmd->add_flag("--json", f.json, "Print the daemon's JSON answer");
}

} // namespace

void add_workspace_commands(CLI::App& app, cli_context& ctx) {
  auto f = std::make_shared<workspace_flags>();
  auto* ws = app.add_subcommand(
      "workspace", "Workspaces of a running daemon: named, quota-limited, kept across sessions");
  ws->require_subcommand(1);

  auto* ls = ws->add_subcommand("ls", "List your workspaces");
  add_common(ls, *f);
  ls->callback([f, &ctx] { ctx.exit_code = list(*f); });

  auto* make = ws->add_subcommand("create", "Create a workspace");
  add_common(make, *f);
  make->add_option("name", f->name, "Its name: a-z 0-9 . _ -, a letter or digit first")
      ->required();
  make->add_option("--quota", f->quota, "Its size, e.g. 64MiB, 1GiB (default: the daemon's)");
  make->callback([f, &ctx] { ctx.exit_code = create(*f); });

  auto* rm = ws->add_subcommand("rm", "Remove a workspace and its files");
  add_common(rm, *f);
  rm->add_option("name", f->name, "Its name")->required();
  rm->callback([f, &ctx] { ctx.exit_code = remove(*f); });
}

} // namespace castellan::cli
