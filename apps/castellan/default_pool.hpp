#pragma once

/// @file default_pool.hpp
/// The one pool `castellan exec`/`run` start and `castellan serve` serves
/// without a config: its flags and how they become a pool_config.

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "actors/pool/pool_actor.hpp"
#include "ipc/outcome.hpp"

namespace castellan::cli {

/// The defaults are pool_spec's (as a config's [[pools]] has them), but for
/// the size: one worker for one exec.
struct pool_options {
  uint32_t pool_size = 1;
  std::string python = pool_spec{}.python;
  bool worker_stderr = pool_spec{}.worker_stderr;
  std::string policy;                ///< empty: the pre-built default policy
  std::string isolation = "sandbox"; ///< "sandbox" or "none"
  std::string mode = to_string(pool_spec{}.mode); ///< "isolated" or "shared" (pool_config::mode)
  bool warm_start = pool_spec{}.warm_start;        ///< pool_config::warm_start
};

/// Adds --pool-size, --python, --worker-stderr, --policy, --isolation,
/// --mode and --warm-start to `cmd`.
void add_pool_flags(CLI::App* cmd, pool_options& o);

/// The pool the flags describe: under --policy (a file or a pre-built
/// policy by name), else the pre-built default; `extends` by name resolves
/// in the policies directory.
outcome<pool_config> default_pool(const pool_options& o);

} // namespace castellan::cli
