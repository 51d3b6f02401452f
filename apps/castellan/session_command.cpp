/// @file session_command.cpp
/// `castellan session create|exec|run|ls|stats|rm`: sessions of a running
/// daemon (docs/api.md, "Sessions"), through its API. The daemon is the one
/// --connect (or CASTELLAN_CONNECT) names, else the socket `castellan
/// serve` listens on by default; CASTELLAN_TOKEN is sent as the token.

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "actors/exec_json.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/daemon_client.hpp"
#include "apps/castellan/duration.hpp"
#include "apps/castellan/exec_input.hpp"
#include "apps/castellan/remote_exec.hpp"

namespace castellan::cli {

namespace {

using json = nlohmann::json;

struct session_flags : exec_input {
  std::string connect;
  std::string id;
  bool json = false;
  // create
  std::string pool;
  std::string workspace;
  std::string idle_ttl;
  std::string max_lifetime;
  // exec, run
  std::string timeout;
  std::vector<std::string> argv;
};

/// A session id as the daemon gives them, and nothing that could change the
/// URL it goes in.
bool valid_id(const std::string& id) {
  if (id.empty() || id.size() > 64 || id == "." || id == "..")
    return false;
  for (char c : id)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
          c == '-' || c == '_' || c == '.'))
      return false;
  return true;
}

/// The daemon to talk to, or "" having said why there is none.
std::string target_of(const session_flags& f) {
  std::string target = daemon_target(f.connect);
  if (target.empty())
    std::cerr << "castellan session: no daemon to ask: give --connect (or CASTELLAN_CONNECT), "
                 "or set XDG_RUNTIME_DIR to find the default socket\n";
  return target;
}

/// `key` of `j` as text, whatever its type ("" when missing).
std::string text(const json& j, const char* key) {
  if (!j.contains(key))
    return {};
  return j[key].is_string() ? j[key].get<std::string>() : j[key].dump();
}

/// Milliseconds as the CLI shows a duration.
std::string ms_text(const json& v) {
  if (!v.is_number_unsigned())
    return "?";
  const auto ms = v.get<uint64_t>();
  if (ms < 10000)
    return std::to_string(ms) + " ms";
  return std::to_string(ms / 1000) + " s";
}

/// A TTL flag into `body[key]`; false (having said why) when it is not a
/// duration.
bool add_duration(json& body, const char* key, const char* flag, const std::string& value) {
  if (value.empty())
    return true;
  auto ms = parse_duration_ms(value);
  if (!ms) {
    std::cerr << "castellan session create: " << flag << ": '" << value
              << "' is not a duration (e.g. 30s, 10m, 2h… as 7200s)\n";
    return false;
  }
  body[key] = *ms;
  return true;
}

int create(const session_flags& f) {
  json body = json::object();
  if (!f.pool.empty())
    body["pool"] = f.pool;
  if (!f.workspace.empty())
    body["workspace"] = f.workspace;
  if (!add_duration(body, "idle_ttl_ms", "--idle-ttl", f.idle_ttl) ||
      !add_duration(body, "max_lifetime_ms", "--max-lifetime", f.max_lifetime))
    return usage_exit_code;
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, "POST", "/v1/sessions", dump_json(body));
  if (a.exit_code != 0)
    return a.exit_code;
  std::cout << (f.json ? dump_json(a.body) : text(a.body, "id")) << "\n";
  return 0;
}

int list(const session_flags& f) {
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, "GET", "/v1/sessions");
  if (a.exit_code != 0)
    return a.exit_code;
  if (f.json) {
    std::cout << dump_json(a.body) << "\n";
    return 0;
  }
  if (!a.body.contains("sessions") || !a.body["sessions"].is_array()) {
    std::cerr << "castellan: the daemon's answer is unreadable: no sessions\n";
    return usage_exit_code;
  }
  for (const auto& s : a.body["sessions"])
    std::cout << text(s, "id") << "  pool=" << text(s, "pool") << "  owner=" << text(s, "owner")
              << "  created=" << text(s, "created") << "\n";
  return 0;
}

/// A session's stats, one `name: value` a line.
void print_stats(const json& s) {
  std::cout << "id: " << text(s, "id") << "\n"
            << "state: " << text(s, "state") << "\n"
            << "pool: " << text(s, "pool") << "\n"
            << "owner: " << text(s, "owner") << "\n"
            << "created: " << text(s, "created") << "\n"
            << "execs: " << text(s, "execs") << "\n"
            << "idle: " << ms_text(s.value("idle_ms", json())) << " (idle TTL "
            << ms_text(s.value("idle_ttl_ms", json())) << ")\n"
            << "age: " << ms_text(s.value("age_ms", json())) << " (maximum lifetime "
            << ms_text(s.value("max_lifetime_ms", json())) << ")\n";
  if (s.contains("worker") && s["worker"].is_object()) {
    const json& w = s["worker"];
    std::cout << "cpu_us: " << text(w, "cpu_us") << "\n"
              << "memory_bytes: " << text(w, "memory_bytes") << "\n"
              << "memory_peak_bytes: " << text(w, "memory_peak_bytes") << "\n"
              << "tasks: " << text(w, "tasks") << "\n";
  }
  if (!text(s, "end_reason").empty())
    std::cout << "end_reason: " << text(s, "end_reason") << "\n";
}

/// `stats` (GET) or `rm` (DELETE) of one session.
int one(const session_flags& f, const std::string& method) {
  if (!valid_id(f.id)) {
    std::cerr << "castellan session: '" << f.id << "' is not a session id\n";
    return usage_exit_code;
  }
  const std::string target = target_of(f);
  if (target.empty())
    return usage_exit_code;
  auto a = ask_daemon(target, method, "/v1/sessions/" + f.id);
  if (a.exit_code != 0)
    return a.exit_code;
  if (f.json)
    std::cout << dump_json(a.body) << "\n";
  else if (method == "GET")
    print_stats(a.body);
  return 0;
}

/// `exec` (code) or `run` (argv) in the session: as `castellan exec
/// --connect` prints it, with its exit codes.
int run_in(session_flags& f, exec_request req, const cli_context& ctx) {
  if (!valid_id(f.id)) {
    std::cerr << "castellan session: '" << f.id << "' is not a session id\n";
    return usage_exit_code;
  }
  if (!add_setup(f, req))
    return usage_exit_code;
  remote_options ro;
  ro.target = target_of(f);
  if (ro.target.empty())
    return usage_exit_code;
  ro.session = f.id;
  ro.json = f.json;
  ro.file_out_locals = f.file_out_locals;
  if (!f.timeout.empty()) {
    ro.timeout_ms = parse_duration_ms(f.timeout);
    if (!ro.timeout_ms) {
      std::cerr << "castellan: --timeout: '" << f.timeout
                << "' is not a duration (e.g. 500ms, 2s, 1m)\n";
      return usage_exit_code;
    }
  }
  return run_remote(ro, req, ctx.started);
}

void add_common(CLI::App* cmd, session_flags& f) {
  cmd->add_option("--connect", f.connect,
                  "The daemon: unix:PATH, http://HOST:PORT or https://HOST:PORT (default: "
                  "$CASTELLAN_CONNECT, else the socket `castellan serve` listens on by default; "
                  "$CASTELLAN_TOKEN is sent as the bearer token)");
  cmd->add_flag("--json", f.json, "Print the daemon's JSON answer");
}

} // namespace

void add_session_commands(CLI::App& app, cli_context& ctx) {
  auto f = std::make_shared<session_flags>();
  auto* session = app.add_subcommand(
      "session", "Sessions of a running daemon: one sandbox kept across execs");
  session->require_subcommand(1);

  auto* make = session->add_subcommand("create", "Create a session; print its id");
  add_common(make, *f);
  make->add_option("--pool", f->pool, "The daemon's pool it is made from (default: its first)");
  make->add_option("--workspace", f->workspace, "The workspace bound at /workspace");
  make->add_option("--idle-ttl", f->idle_ttl,
                   "End it after this long without an exec, e.g. 30s, 10m (default: 10m)");
  make->add_option("--max-lifetime", f->max_lifetime,
                   "End it this long after it started, e.g. 3600s (default: 1h)");
  make->callback([f, &ctx] { ctx.exit_code = create(*f); });

  auto* exec = session->add_subcommand("exec", "Run Python code in a session");
  add_common(exec, *f);
  exec->add_option("id", f->id, "The session's id")->required();
  exec->add_option("code", f->code, "Python source, or - to read it from stdin");
  exec->add_option("-f,--file", f->file, "Read the Python source from FILE");
  exec->add_option("--timeout", f->timeout, "The exec's deadline, e.g. 500ms, 2s, 1m");
  add_input_flags(exec, *f);
  exec->callback([f, &ctx] {
    if (!load_code(*f, "session exec")) {
      ctx.exit_code = usage_exit_code;
      return;
    }
    exec_request req;
    req.code = std::move(f->code);
    ctx.exit_code = run_in(*f, std::move(req), ctx);
  });

  auto* run = session->add_subcommand(
      "run", "Run a command in a session: castellan session run ID -- CMD ARGS...");
  add_common(run, *f);
  run->add_option("id", f->id, "The session's id")->required();
  run->add_option("command", f->argv, "The program and its arguments")->required();
  run->add_option("--timeout", f->timeout, "The exec's deadline, e.g. 500ms, 2s, 1m");
  add_input_flags(run, *f);
  run->callback([f, &ctx] {
    exec_request req;
    req.argv = f->argv;
    ctx.exit_code = run_in(*f, std::move(req), ctx);
  });

  auto* ls = session->add_subcommand("ls", "List the sessions");
  add_common(ls, *f);
  ls->callback([f, &ctx] { ctx.exit_code = list(*f); });

  auto* stats = session->add_subcommand("stats", "A session's state and its worker's numbers");
  add_common(stats, *f);
  stats->add_option("id", f->id, "The session's id")->required();
  stats->callback([f, &ctx] { ctx.exit_code = one(*f, "GET"); });

  auto* rm = session->add_subcommand("rm", "Destroy a session");
  add_common(rm, *f);
  rm->add_option("id", f->id, "The session's id")->required();
  rm->callback([f, &ctx] { ctx.exit_code = one(*f, "DELETE"); });
}

} // namespace castellan::cli
