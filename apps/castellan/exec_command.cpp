/// @file exec_command.cpp
/// `castellan exec` and `castellan run`: start the actor tree in-process, run
/// one request through the supervisor, print the result, exit with the
/// executed code's exit code.

#include <unistd.h>

#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include <CLI/CLI.hpp>
#include <caf/all.hpp>

#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"
#include "actors/interfaces.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/exec_setup.hpp"
#include "actors/pool/pool_policy.hpp"
#include "actors/pool/sandbox_profile.hpp"
#include "platform/install_layout.hpp"
#include "apps/castellan/cli_context.hpp"
#include "apps/castellan/daemon_client.hpp"
#include "apps/castellan/default_pool.hpp"
#include "apps/castellan/duration.hpp"
#include "apps/castellan/exec_input.hpp"
#include "apps/castellan/file_transfer.hpp"
#include "apps/castellan/interrupt_canceller.hpp"
#include "apps/castellan/remote_exec.hpp"
#include "apps/castellan/result_output.hpp"

namespace castellan::cli {

namespace {

struct exec_options : pool_options, exec_input {
  bool json = false;
  std::string timeout;
  std::string request_policy;       ///< a policy for this request only (exec_request::policy)
  std::string audit_log;            ///< write this run's audit records here
  std::string connect;              ///< --connect: a daemon to send the exec to
  std::string pool;                 ///< --pool: the daemon's pool to run on
  // command mode
  std::vector<std::string> argv;
};

void add_connect_flags(CLI::App* cmd, exec_options& o) {
  cmd->add_option("--connect", o.connect,
                  "Send the request to a running `castellan serve` at unix:PATH, "
                  "http://HOST:PORT or https://HOST:PORT (default: $CASTELLAN_CONNECT; "
                  "$CASTELLAN_TOKEN is sent as the bearer token)");
}

/// --request-policy's policy (a file or a pre-built name, with its
/// `extends`) as the merged policy's JSON, resolved here: the request carries
/// everything, and the supervisor or daemon reads no file of the client's.
/// False, having said why, when it does not load.
bool load_request_policy(const std::string& arg, std::string& json_out) {
  auto layout = platform::find_install_layout();
  auto doc = policy::load_policy(layout ? platform::resolve_policy_argument(*layout, arg) : arg,
                                 layout ? layout->policies_dir : std::string());
  if (!doc) {
    std::cerr << "castellan: invalid request policy: " << doc.to_failure().describe() << "\n";
    return false;
  }
  json_out = policy::to_json(*doc).dump();
  return true;
}

/// The flags that shape a supervisor started for the one call: a daemon's
/// pools are its own. The first one given, or "".
std::string embedded_only_flag(const CLI::App* cmd) {
  for (const char* name : {"--pool-size", "--python", "--worker-stderr", "--policy",
                           "--isolation", "--mode", "--warm-start", "--audit-log"}) {
    const CLI::Option* opt = cmd->get_option_no_throw(name);
    if (opt != nullptr && opt->count() > 0)
      return name;
  }
  return {};
}

/// Runs `req` on the daemon --connect names: the process exit code.
int run_connected(const exec_options& o, const CLI::App* cmd, const std::string& target,
                  exec_request req, std::chrono::steady_clock::time_point started) {
  if (auto flag = embedded_only_flag(cmd); !flag.empty()) {
    std::cerr << "castellan: " << flag << " shapes a pool started for this call; the daemon at "
              << target << " runs its own pools (choose one with --pool)\n";
    return usage_exit_code;
  }
  remote_options ro;
  ro.target = target;
  ro.pool = o.pool;
  ro.json = o.json;
  ro.file_out_locals = o.file_out_locals;
  if (!o.timeout.empty()) {
    ro.timeout_ms = parse_duration_ms(o.timeout);
    if (!ro.timeout_ms) {
      std::cerr << "castellan: --timeout: '" << o.timeout
                << "' is not a duration (e.g. 500ms, 2s, 1m)\n";
      return usage_exit_code;
    }
  }
  if (!o.request_policy.empty() && !load_request_policy(o.request_policy, ro.request_policy_json))
    return usage_exit_code;
  return run_remote(ro, req, started);
}

void add_common_flags(CLI::App* cmd, exec_options& o) {
  cmd->add_flag("--json", o.json, "Print the whole result as one JSON object");
  add_pool_flags(cmd, o);
  cmd->add_option("--timeout", o.timeout,
                  "Deadline from the start of the command, e.g. 500ms, 2s, 1m (default: the "
                  "policy's limits.timeout_ms, else 30s)");
  cmd->add_option("--audit-log", o.audit_log,
                  "Append this run's audit records (JSON lines) to FILE");
  add_input_flags(cmd, o);
  add_connect_flags(cmd, o);
  cmd->add_option("--pool", o.pool, "With --connect: the daemon's pool to run on (default: its "
                                    "first)");
  cmd->add_option("--request-policy", o.request_policy,
                  "A policy for this request only, on top of the pool's (--policy): a stricter "
                  "one runs on the warm workers in isolated mode, narrowed in the exec's process; "
                  "any other in a pool of its own");
}

/// Runs `req` through a freshly started actor tree; the process exit code.
/// `started`: when the command started, which --timeout counts from.
int run_request(const exec_options& o, exec_request req,
                std::chrono::steady_clock::time_point started) {
  std::optional<uint64_t> timeout_ms;
  if (!o.timeout.empty()) {
    timeout_ms = parse_duration_ms(o.timeout);
    if (!timeout_ms) {
      std::cerr << "castellan: --timeout: '" << o.timeout
                << "' is not a duration (e.g. 500ms, 2s, 1m)\n";
      return usage_exit_code;
    }
  }
  // Ctrl-C cancels the exec (interrupt_canceller) instead of killing the
  // CLI: SIGINT is blocked before the actor system starts its threads.
  sigint_block block_sigint;
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};

  supervisor_config sc;
  auto made = default_pool(o);
  if (!made) {
    std::cerr << "castellan: " << made.error().describe() << "\n";
    return usage_exit_code;
  }
  pool_config pc = std::move(*made);
  auto layout = platform::find_install_layout();
  const std::string policies_dir = layout ? layout->policies_dir : std::string();
  if (!o.request_policy.empty()) {
    if (!load_request_policy(o.request_policy, req.policy))
      return usage_exit_code;
    // The user of the CLI is also its operator: the request policy may bind
    // what --policy could, and allow network.
    sc.policy_pools.policy_dir = policies_dir;
    sc.policy_pools.bindable_paths = {"/"};
    sc.policy_pools.allow_network = true;
    sc.policy_pools.max_pools = 1;
  }
  // `run`: the program asked for may be executed, whatever else is denied.
  if (!req.argv.empty()) {
    if (!is_utf8(req.argv.front())) {
      // The pool's policy would have to name it, and policies are JSON.
      std::cerr << "castellan run: the program's path is not UTF-8, so no policy can allow it\n";
      return usage_exit_code;
    }
    allow_program_to_run(pc, req.argv.front());
  }
  sc.pools.push_back(pc);
  if (!o.audit_log.empty()) {
    // The log of this run records everything it did, not only what the
    // policy's audit section selects.
    audit_config audit;
    audit.enabled = true;
    audit.events = {"*"};
    audit.file.path = o.audit_log;
    audit.file.fsync = fsync_policy::every_record;
    sc.audit = audit;
  }
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::cerr << "castellan: " << sup.error().describe() << "\n";
    return usage_exit_code;
  }
  int rc = usage_exit_code;
  {
    caf::scoped_actor self{sys};
    // The CLI names its one exec, so that a cancel can refer to it.
    req.exec_id = 1;
    if (timeout_ms) {
      // --timeout bounds the whole command: what castellan took to start
      // (the actor system, the policy, the pool) is already spent. The
      // pool's deadline then counts from its acceptance, the wait for a
      // ready worker included.
      const auto spent = static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() -
                                                              started)
          .count());
      req.timeout_ms = *timeout_ms > spent ? *timeout_ms - spent : 1;
    }
    auto pending = self->request(*sup, caf::infinite, exec_atom::value, std::move(req));
    {
      // Started after the request is queued: a cancel queues behind it.
      interrupt_canceller canceller([&sys, sup = *sup] {
        std::cerr << "castellan: interrupted: cancelling exec 1\n";
        caf::scoped_actor canceller_self{sys};
        canceller_self->request(sup, std::chrono::seconds(10), cancel_atom::value, uint64_t{1})
          .receive(
            [&](cancel_reply& r) {
              if (r.outcome != cancel_outcome::cancelled_running &&
                  r.outcome != cancel_outcome::cancelled_queued)
                std::cerr << "castellan: " << r.detail << "\n";
            },
            [&](caf::error& err) {
              std::cerr << "castellan: cancel: " << describe(err, sys) << "\n";
            });
      });
      pending.receive(
        [&](exec_result& r) {
          print_result(r, o.json);
          save_files_out(r, o.file_out_locals);
          rc = r.exit_code;
        },
        [&](caf::error& err) { std::cerr << "castellan: " << describe(err, sys) << "\n"; });
    }
    if (!o.audit_log.empty())
      self->request(*sup, std::chrono::seconds(30), audit_flush_atom::value)
        .receive([](audit_stats&) {},
                 [&](caf::error& err) {
                   std::cerr << "castellan: audit log: " << describe(err, sys) << "\n";
                 });
    self->send(*sup, shutdown_atom::value);
  }
  return rc;
}

/// `castellan status`: starts the tree, waits until its workers are warm, and
/// prints the pools' status and the telemetry summary, or (--metrics) the
/// Prometheus exposition.
int run_status(const exec_options& o, bool metrics) {
  caf::actor_system_config cfg;
  prepare_actor_system_config(cfg);
  caf::actor_system sys{cfg};
  supervisor_config sc;
  pool_config pc;
  pc.size = o.pool_size;
  pc.python = o.python;
  if (o.isolation == "none")
    pc.isolation = platform::isolation_mode::none;
  sc.pools.push_back(pc);
  auto sup = spawn_supervisor(sys, sc);
  if (!sup) {
    std::cerr << "castellan: " << sup.error().describe() << "\n";
    return usage_exit_code;
  }
  caf::scoped_actor self{sys};
  std::vector<pool_status> pools;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (;;) {
    self->request(*sup, std::chrono::seconds(5), status_atom::value)
      .receive([&](std::vector<pool_status>& st) { pools = std::move(st); },
               [&](caf::error&) {});
    bool warm = !pools.empty();
    for (const auto& p : pools)
      warm = warm && p.idle == p.size && p.size > 0;
    if (warm || std::chrono::steady_clock::now() > deadline)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // The pools report their gauges once a second: wait for one report.
  std::this_thread::sleep_for(std::chrono::milliseconds(1100));
  int rc = 0;
  auto print = [&](auto atom, const char* what) {
    self->request(*sup, std::chrono::seconds(10), atom)
      .receive([&](std::string& text) { std::cout << text; },
               [&](caf::error& err) {
                 std::cerr << "castellan: " << what << ": " << describe(err, sys) << "\n";
                 rc = usage_exit_code;
               });
  };
  if (metrics) {
    print(metrics_atom::value, "metrics");
  } else {
    for (const auto& p : pools)
      std::cout << pool_line(p) << "\n";
    print(summary_atom::value, "summary");
  }
  self->send(*sup, shutdown_atom::value);
  return rc;
}

} // namespace

void add_exec_commands(CLI::App& app, cli_context& ctx) {
  auto opts = std::make_shared<exec_options>();

  auto* exec = app.add_subcommand("exec", "Run Python code in a warm worker");
  add_common_flags(exec, *opts);
  exec->add_option("code", opts->code, "Python source, or - to read it from stdin");
  exec->add_option("-f,--file", opts->file, "Read the Python source from FILE");
  exec->callback([opts, exec, &ctx] {
    if (!load_code(*opts, "exec")) {
      ctx.exit_code = usage_exit_code;
      return;
    }
    exec_request req;
    req.code = std::move(opts->code);
    if (!add_setup(*opts, req)) {
      ctx.exit_code = usage_exit_code;
      return;
    }
    if (auto target = connect_target(opts->connect); !target.empty()) {
      ctx.exit_code = run_connected(*opts, exec, target, std::move(req), ctx.started);
      return;
    }
    if (!opts->pool.empty()) {
      std::cerr << "castellan: --pool names a daemon's pool: give --connect too\n";
      ctx.exit_code = usage_exit_code;
      return;
    }
    ctx.exit_code = run_request(*opts, std::move(req), ctx.started);
  });

  auto* status = app.add_subcommand("status", "Start the pools, wait until they are warm, report");
  auto metrics = std::make_shared<bool>(false);
  status->add_flag("--metrics", *metrics, "Print the Prometheus text exposition");
  status->add_option("--pool-size", opts->pool_size, "Warm workers to start")
    ->check(CLI::Range(1u, 256u));
  status->add_option("--python", opts->python, "The interpreter the workers run");
  add_connect_flags(status, *opts);
  status->callback([opts, metrics, status, &ctx] {
    if (auto target = connect_target(opts->connect); !target.empty()) {
      if (auto flag = embedded_only_flag(status); !flag.empty()) {
        std::cerr << "castellan: " << flag << " shapes a pool started for this call; the daemon "
                  << "at " << target << " runs its own pools\n";
        ctx.exit_code = usage_exit_code;
        return;
      }
      ctx.exit_code = remote_status(target, *metrics);
      return;
    }
    ctx.exit_code = run_status(*opts, *metrics);
  });

  auto* run = app.add_subcommand("run", "Run a command in a worker: castellan run -- CMD ARGS...");
  add_common_flags(run, *opts);
  run->add_option("command", opts->argv, "The program and its arguments")->required();
  run->callback([opts, run, &ctx] {
    exec_request req;
    req.argv = opts->argv;
    if (!add_setup(*opts, req)) {
      ctx.exit_code = usage_exit_code;
      return;
    }
    if (auto target = connect_target(opts->connect); !target.empty()) {
      ctx.exit_code = run_connected(*opts, run, target, std::move(req), ctx.started);
      return;
    }
    if (!opts->pool.empty()) {
      std::cerr << "castellan: --pool names a daemon's pool: give --connect too\n";
      ctx.exit_code = usage_exit_code;
      return;
    }
    ctx.exit_code = run_request(*opts, std::move(req), ctx.started);
  });
}

} // namespace castellan::cli
