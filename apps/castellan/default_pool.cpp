#include "apps/castellan/default_pool.hpp"

#include "actors/policy/engine/policy_loader.hpp"
#include "actors/pool/pool_policy.hpp"
#include "platform/install_layout.hpp"

namespace castellan::cli {

void add_pool_flags(CLI::App* cmd, pool_options& o) {
  cmd->add_option("--pool-size", o.pool_size, "Warm workers to start")->check(CLI::Range(1u, 256u));
  cmd->add_option("--python", o.python, "The interpreter the workers run");
  cmd->add_flag("--worker-stderr", o.worker_stderr, "Show the workers' own diagnostics on stderr");
  cmd->add_option("--policy", o.policy,
                  "The policy the workers run under: a file, or a pre-built policy by name "
                  "(strict, no-network, …; default: default)");
  cmd->add_option("--isolation", o.isolation,
                  "sandbox (default: namespaces, Landlock, seccomp, cgroups) or none "
                  "(plain processes, for development)")
      ->check(CLI::IsMember({"sandbox", "none"}));
  cmd->add_option("--mode", o.mode,
                  "isolated (default: each exec in a child forked from a warm, pre-imported "
                  "zygote, in its own Landlock domain; /tmp, /dev/shm and System V IPC emptied "
                  "after each) or shared (the warm interpreter runs every exec itself: faster, "
                  "but execs share its state, so only for requesters of one trust domain); "
                  "docs/security.md says what each shares")
      ->check(CLI::IsMember({"isolated", "shared"}));
  cmd->add_flag("--warm-start", o.warm_start,
                "Start sandboxed workers from a warm launcher (the interpreter and harness "
                "loaded once) instead of exec'ing Python for each; the workers of a pool then "
                "share the launcher's address-space layout and hash secret");
}

outcome<pool_config> default_pool(const pool_options& o) {
  pool_config pc;
  pc.size = o.pool_size;
  pc.python = o.python;
  pc.worker_stderr = o.worker_stderr;
  from_string(o.mode, pc.mode);
  pc.warm_start = o.warm_start;
  auto layout = platform::find_install_layout();
  const std::string policies_dir = layout ? layout->policies_dir : std::string();
  std::string policy_path =
      layout ? platform::resolve_policy_argument(*layout, o.policy) : o.policy;
  if (policy_path.empty() && !policies_dir.empty())
    policy_path = policies_dir + "/" + platform::default_policy_name + ".json";
  if (!policy_path.empty()) {
    auto doc = policy::load_policy(policy_path, policies_dir);
    if (!doc)
      return logic_failure("invalid policy: " + doc.to_failure().describe());
    if (auto ok = apply_policy(*doc, pc); !ok)
      return logic_failure(ok.error().describe());
  }
  if (o.isolation == "none")
    pc.isolation = platform::isolation_mode::none;
  return pc;
}

} // namespace castellan::cli
