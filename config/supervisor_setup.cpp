#include "config/supervisor_setup.hpp"

#include "actors/policy/engine/compiled_policy.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "actors/policy/engine/policy_loader.hpp"

namespace castellan::config {

outcome<supervisor_config> to_supervisor_config(const serve_config& cfg) {
  supervisor_config sc;
  sc.policies = cfg.policies;
  for (const auto& entry : cfg.pools) {
    pool_config pc{entry.spec};
    // The code travels in one frame: the ring must hold it (as a policy's
    // limits.code_bytes grows it).
    while (pc.code_limit + 64 > pc.ring_capacity && pc.ring_capacity < (64u << 20))
      pc.ring_capacity <<= 1;
    if (entry.policy_is_name) {
      pc.named_policy = entry.policy;
    } else {
      auto doc = policy::load_policy(entry.policy_file, cfg.policies.directory);
      if (!doc)
        return doc.to_failure().wrap("pool " + entry.spec.name + ": policy " + entry.policy_file);
      pc.policy = policy::compiled_policy::compile(std::move(*doc),
                                                   policy::policy_name_of(entry.policy_file));
    }
    sc.pools.push_back(std::move(pc));
  }
  sc.audit = cfg.audit;
  sc.egress = cfg.egress;
  sc.policy_pools = cfg.request_policies;
  sc.sessions = cfg.sessions;
  if (cfg.workspaces.enabled) {
    workspace_config ws;
    ws.store.directory = cfg.state_dir + "/workspaces";
    ws.store.max_workspaces = cfg.workspaces.max_count;
    ws.store.max_total_quota_bytes = cfg.workspaces.max_total_quota_bytes;
    ws.default_quota_bytes = cfg.workspaces.default_quota_bytes;
    ws.max_quota_bytes = cfg.workspaces.max_quota_bytes;
    sc.workspaces = std::move(ws);
  }
  return sc;
}

} // namespace castellan::config
