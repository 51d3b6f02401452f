/// @file serve_command.cpp
/// `castellan serve`: the actor tree as a daemon behind the HTTP/JSON API
/// (docs/api.md), until SIGTERM or SIGINT, then a graceful drain.

#include <signal.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <map>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>
#include <spdlog/spdlog.h>

#include "actors/api/api_service.hpp"
#include "actors/api/listen_address.hpp"
#include "actors/interfaces.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/default_pool.hpp"
#include "apps/castellan/fd_limit.hpp"
#include "config/config_loader.hpp"
#include "config/listen_check.hpp"
#include "config/supervisor_setup.hpp"
#include "ipc/unique_fd.hpp"

namespace castellan::cli {

namespace {

struct serve_options : pool_options {
  std::string config_file;  ///< --config: pools, policies, audit… from castellan.toml
  bool pool_flags = false;  ///< a pool flag was given (they describe the one built-in pool)
  bool drain_given = false; ///< --drain-grace-ms was given (it wins over the config's)
  std::vector<std::string> listen;
  uint64_t drain_grace_ms = 10000;
  uint64_t max_body_bytes = 4 * 1024 * 1024;
  uint64_t max_connections = 1024;
  uint64_t read_timeout_ms = 10000;
};

/// With no --listen: /run/castellan/castellan.sock as root (the directory
/// made 0755 if missing), $XDG_RUNTIME_DIR/castellan.sock otherwise.
outcome<std::string> default_listen() {
  if (::geteuid() == 0) {
    if (::mkdir("/run/castellan", 0755) != 0 && errno != EEXIST)
      return errno_failure("create /run/castellan");
    return std::string("unix:/run/castellan/castellan.sock");
  }
  const char* dir = std::getenv("XDG_RUNTIME_DIR");
  if (dir == nullptr || *dir != '/')
    return logic_failure("XDG_RUNTIME_DIR is not set: give --listen unix:PATH");
  return "unix:" + std::string(dir) + "/castellan.sock";
}

/// SIGTERM, SIGINT and SIGHUP, blocked in this thread and every thread
/// started after (create it before the actor system), read from a
/// signalfd. SIGHUP reloads the pools of --config (reload_config).
class termination_signals {
public:
  termination_signals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, &saved_);
    fd_ = unique_fd(::signalfd(-1, &set_, SFD_CLOEXEC));
  }
  termination_signals(const termination_signals&) = delete;
  termination_signals& operator=(const termination_signals&) = delete;
  ~termination_signals() { pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }

  bool ok() const { return fd_.get() >= 0; }

  /// Blocks until one of them arrives; its number.
  int wait() {
    signalfd_siginfo info{};
    for (;;) {
      ssize_t n = ::read(fd_.get(), &info, sizeof(info));
      if (n == static_cast<ssize_t>(sizeof(info)))
        return static_cast<int>(info.ssi_signo);
      if (n < 0 && errno != EINTR)
        return SIGTERM;
    }
  }

private:
  sigset_t set_;
  sigset_t saved_;
  unique_fd fd_;
};

/// Each pool's policy by its name in the policy directory, for the API's
/// policy_scope; a pool whose policy is a file by path has none.
std::map<std::string, std::string> pool_policies(const config::serve_config& c) {
  std::map<std::string, std::string> out;
  for (const auto& p : c.pools)
    if (p.policy_is_name)
      out.emplace(p.spec.name, p.policy);
  return out;
}

/// The supervisor's config and the daemon's settings from `o.config_file`:
/// every error of the file is printed; false if there was one.
bool load_config_file(const serve_options& o, supervisor_config& sc,
                      std::vector<std::string>& listen, uint64_t& drain_grace_ms,
                      api::api_options& api_opts, config::serve_config& in_force) {
  const auto loaded = config::load_serve_config(o.config_file);
  for (const auto& w : loaded.warnings)
    std::cerr << w.describe() << '\n';
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors)
      std::cerr << e.describe() << '\n';
    std::cerr << "castellan serve: " << o.config_file << ": " << loaded.errors.size()
              << (loaded.errors.size() == 1 ? " error" : " errors") << "; not started\n";
    return false;
  }
  // The state directory (the audit log's default home) is the daemon's own:
  // made if missing, readable by its user only.
  std::error_code ec;
  std::filesystem::create_directories(loaded.config.state_dir, ec);
  if (ec || ::chmod(loaded.config.state_dir.c_str(), 0700) != 0) {
    std::cerr << "castellan serve: state_dir " << loaded.config.state_dir << ": "
              << (ec ? ec.message() : std::string(std::strerror(errno))) << "\n";
    return false;
  }
  auto made = config::to_supervisor_config(loaded.config);
  if (!made) {
    std::cerr << "castellan serve: " << o.config_file << ": " << made.error().describe() << "\n";
    return false;
  }
  sc = std::move(*made);
  in_force = loaded.config;
  const auto& auth = loaded.config.auth;
  if (listen.empty()) {
    listen = loaded.config.listen;
  } else {
    // Listeners given here follow the file's rules, as its own do.
    bool ok = true;
    for (const auto& t : listen) {
      auto why = config::check_listener_security(t, auth.allow_plaintext_loopback,
                                                 !auth.tokens_file.empty(),
                                                 !loaded.config.tls.cert_file.empty());
      if (!why.empty()) {
        std::cerr << "castellan serve: --listen " << t << ": " << why << "\n";
        ok = false;
      }
    }
    if (!ok)
      return false;
  }
  if (!auth.tokens_file.empty())
    api_opts.tokens = auth.tokens;
  api_opts.socket_access.mode = auth.socket_mode;
  api_opts.socket_access.gid = auth.socket_gid;
  api_opts.default_pool = loaded.config.pools.front().spec.name;
  api_opts.pool_policies = pool_policies(loaded.config);
  api_opts.tls = {loaded.config.tls.cert_file, loaded.config.tls.key_file};
  if (!o.drain_given)
    drain_grace_ms = loaded.config.drain_grace_ms;
  return true;
}

/// SIGHUP: reads `o.config_file` again and gives the supervisor its pools
/// and the API the tokens file's entries. A file that does not load, or
/// pools that do not start, change nothing (every error is printed); what
/// only a restart changes is said.
void reload_config(const serve_options& o, caf::actor_system& sys, const supervisor_actor& sup,
                   api::api_service& api, config::serve_config& in_force) {
  if (o.config_file.empty()) {
    std::cerr << "castellan: SIGHUP: no config file to reload (started without --config)\n";
    return;
  }
  const auto loaded = config::load_serve_config(o.config_file);
  for (const auto& w : loaded.warnings)
    std::cerr << w.describe() << '\n';
  const std::string kept = "; the config in force is kept\n";
  if (!loaded.ok()) {
    for (const auto& e : loaded.errors)
      std::cerr << e.describe() << '\n';
    std::cerr << "castellan: SIGHUP: " << o.config_file << ": " << loaded.errors.size()
              << (loaded.errors.size() == 1 ? " error" : " errors") << kept;
    return;
  }
  auto made = config::to_supervisor_config(loaded.config);
  if (!made) {
    std::cerr << "castellan: SIGHUP: " << o.config_file << ": " << made.error().describe() << kept;
    return;
  }
  std::string why;
  pools_change change;
  caf::scoped_actor ask{sys};
  ask->request(sup, std::chrono::seconds(120), reconfigure_atom::value, std::move(made->pools))
    .receive([&](pools_change& c) { change = std::move(c); },
             [&](caf::error& err) { why = sys.render(err); });
  if (!why.empty()) {
    std::cerr << "castellan: SIGHUP: " << o.config_file << ": " << why << kept;
    return;
  }
  api.set_default_pool(loaded.config.pools.front().spec.name);
  api.set_pool_policies(pool_policies(loaded.config));
  const auto& was = in_force;
  auto now = loaded.config;
  // Tokens are re-read, so that one can be added or revoked without a
  // restart (before the line that says the reload is done: a token revoked
  // is refused from then on). Whether there is a tokens file at all decides
  // what the listeners bound at start admit, so that waits for a restart.
  const bool tokens_file_changed = now.auth.tokens_file.empty() != was.auth.tokens_file.empty();
  if (tokens_file_changed)
    now.auth = was.auth;
  else if (!now.auth.tokens_file.empty())
    api.replace_tokens(now.auth.tokens);
  std::cerr << "castellan: SIGHUP: reloaded " << o.config_file << ": " << describe(change) << "\n";
  if (tokens_file_changed)
    std::cerr << "castellan: SIGHUP: auth.tokens_file: "
              << (was.auth.tokens_file.empty() ? "adding" : "removing")
              << " the tokens file takes effect on restart; the tokens in force are kept\n";
  else if (!now.auth.tokens_file.empty())
    std::cerr << "castellan: SIGHUP: tokens: " << now.auth.tokens.size() << " from "
              << now.auth.tokens_file << "\n";
  // These are bound or opened once, at start.
  if (now.listen != was.listen)
    std::cerr << "castellan: SIGHUP: listen: changes take effect on restart\n";
  if (now.state_dir != was.state_dir)
    std::cerr << "castellan: SIGHUP: state_dir: changes take effect on restart\n";
  if (now.tls.cert_file != was.tls.cert_file || now.tls.key_file != was.tls.key_file)
    std::cerr << "castellan: SIGHUP: tls: changes take effect on restart\n";
  in_force = std::move(now);
}

int run_serve(const serve_options& o) {
  // A daemon's log is its operators' record: reloads, retired pools,
  // reclaimed cgroups (main.cpp keeps one-shot commands at warn).
  spdlog::set_level(spdlog::level::info);
  if (!o.config_file.empty() && o.pool_flags) {
    std::cerr << "castellan serve: --config describes the pools: give pool flags (--pool-size, "
                 "--mode, --policy, …) without it, or set them in the file\n";
    return usage_exit_code;
  }
  supervisor_config sc;
  std::vector<std::string> texts = o.listen;
  uint64_t drain_grace_ms = o.drain_grace_ms;
  api::api_options api_opts;
  config::serve_config in_force;
  if (!o.config_file.empty()) {
    if (!load_config_file(o, sc, texts, drain_grace_ms, api_opts, in_force))
      return usage_exit_code;
  } else {
    auto pc = default_pool(o);
    if (!pc) {
      std::cerr << "castellan serve: " << pc.error().describe() << "\n";
      return usage_exit_code;
    }
    api_opts.default_pool = pc->name;
    sc.pools.push_back(std::move(*pc));
  }
  if (texts.empty()) {
    auto def = default_listen();
    if (!def) {
      std::cerr << "castellan serve: " << def.error().describe() << "\n";
      return usage_exit_code;
    }
    texts.push_back(*def);
  }
  for (const auto& t : texts) {
    auto addr = api::parse_listen_address(t);
    if (!addr) {
      std::cerr << "castellan serve: --listen: " << addr.error().describe() << "\n";
      return usage_exit_code;
    }
    if (addr->tls && o.config_file.empty()) {
      std::cerr << "castellan serve: --listen " << t
                << ": a TLS listener needs a config (--config) with [tls] and auth.tokens_file\n";
      return usage_exit_code;
    }
    api_opts.listen.push_back(*addr);
  }
  api_opts.policy_dir = sc.policy_pools.policy_dir;
  if (sc.audit)
    api_opts.audit_file = sc.audit->file;
  api_opts.limits.body_bytes = o.max_body_bytes;
  api_opts.limits.max_connections = o.max_connections;
  api_opts.limits.read_timeout = std::chrono::milliseconds(o.read_timeout_ms);
  if (auto warning = raise_fd_limit(o.max_connections); !warning.empty())
    std::cerr << "castellan serve: " << warning << "\n";

  termination_signals signals;
  if (!signals.ok()) {
    std::cerr << "castellan serve: signalfd: " << std::strerror(errno) << "\n";
    return usage_exit_code;
  }
  if (sc.workspaces) {
    // Loop devices and ext4 mounts need root: without it the daemon still
    // serves, with no workspaces (a session that names one is refused).
    if (auto ok = workspace_privileges(); !ok) {
      std::cerr << "castellan serve: workspaces are off: " << ok.error().describe() << "\n";
      sc.workspaces.reset();
    }
  }
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::cerr << "castellan serve: " << sup.error().describe() << "\n";
    return usage_exit_code;
  }
  const bool api_opts_tokens = api_opts.tokens.has_value();
  auto api = api::api_service::start(sys, *sup, std::move(api_opts));
  if (!api) {
    std::cerr << "castellan serve: " << api.error().describe() << "\n";
    caf::anon_send(*sup, shutdown_atom::value);
    return usage_exit_code;
  }
  for (const auto& b : (*api)->bound()) {
    std::cout << "castellan: listening on " << b.to_string() << std::endl;
    if (b.type == api::listen_address::kind::tcp && !b.tls && !api_opts_tokens)
      std::cerr << "castellan: " << b.to_string()
                << " is unauthenticated: any local user can run code through it\n";
  }

  int sig = signals.wait();
  while (sig == SIGHUP) {
    reload_config(o, sys, *sup, **api, in_force);
    sig = signals.wait();
  }
  std::cerr << "castellan: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ": draining ("
            << (*api)->in_flight() << " execs in flight, grace " << drain_grace_ms << " ms)\n";
  (*api)->begin_drain();
  if (!(*api)->wait_idle(std::chrono::milliseconds(drain_grace_ms))) {
    const auto n = (*api)->cancel_in_flight();
    std::cerr << "castellan: grace period over: cancelled " << n << " execs\n";
    // A cancel kills the worker and answers at once; this bounds a stuck one.
    (*api)->wait_idle(std::chrono::seconds(10));
  }
  (*api)->stop();
  caf::anon_send(*sup, shutdown_atom::value);
  std::cerr << "castellan: stopped\n";
  return 0;
}

} // namespace

void add_serve_command(CLI::App& app, cli_context& ctx) {
  auto opts = std::make_shared<serve_options>();
  auto* serve = app.add_subcommand(
      "serve", "Run the supervisor as a daemon behind the HTTP/JSON API (docs/api.md)");
  serve->add_option("--listen", opts->listen,
                    "unix:PATH or tcp:HOST:PORT (loopback only), repeatable (default: "
                    "unix:/run/castellan/castellan.sock as root, else "
                    "unix:$XDG_RUNTIME_DIR/castellan.sock)");
  serve
      ->add_option("--config", opts->config_file,
                   "A castellan.toml (docs/config.md): its pools, policy directory, audit, "
                   "egress limits, listeners and drain grace; --listen and --drain-grace-ms "
                   "given here win")
      ->check(CLI::ExistingFile);
  const auto before = serve->get_options().size();
  add_pool_flags(serve, *opts);
  std::vector<CLI::Option*> pool_flags;
  {
    auto all = serve->get_options();
    pool_flags.assign(all.begin() + static_cast<std::ptrdiff_t>(before), all.end());
  }
  auto* drain = serve->add_option("--drain-grace-ms", opts->drain_grace_ms,
                                  "On SIGTERM/SIGINT, how long execs in flight may finish before "
                                  "they are cancelled (default 10000, or the config's)");
  serve
      ->add_option("--max-body-bytes", opts->max_body_bytes,
                   "The largest request body accepted (default 4 MiB; beyond: 413)")
      ->check(CLI::Range(uint64_t{1024}, uint64_t{1} << 30));
  serve
      ->add_option("--max-connections", opts->max_connections,
                   "Connections open at once (default 1024; beyond: 503 and closed)")
      ->check(CLI::Range(uint64_t{1}, uint64_t{65536}));
  serve
      ->add_option("--read-timeout-ms", opts->read_timeout_ms,
                   "How long a request may take to arrive whole, an idle kept-alive "
                   "connection may wait for its next one, and a client may take to read its "
                   "response; beyond: closed (default 10000)")
      ->check(CLI::Range(uint64_t{100}, uint64_t{3600000}));
  serve->callback([opts, &ctx, pool_flags, drain] {
    opts->pool_flags = std::any_of(pool_flags.begin(), pool_flags.end(),
                                   [](const CLI::Option* f) { return f->count() > 0; });
    opts->drain_given = drain->count() > 0;
    ctx.exit_code = run_serve(*opts);
  });
}

} // namespace castellan::cli
