#pragma once

/// @file install_layout.hpp
/// Where castellan's helper files are: the worker binary and the Python
/// harness, found relative to the running executable so that a build tree
/// (build/bin, build/share) and an installed tree (bin, share) both work.

#include <string>

#include "ipc/outcome.hpp"

namespace castellan::platform {

struct install_layout {
  std::string worker_binary; ///< castellan-worker
  std::string harness;       ///< castellan_harness.py
  std::string policies_dir;  ///< the pre-built policies (may be empty if absent)
  std::string config_file;   ///< the default daemon config, castellan.toml (may be empty if absent)
};

/// The pre-built policy a pool runs when nothing names another.
inline constexpr const char* default_policy_name = "default";

/// True when a policy argument is a pre-built policy's name rather than a
/// path: no '/' and no ".json" ending ("strict", not "./strict" or "strict.json").
bool is_policy_name(const std::string& argument);

/// What a policy argument names: a pre-built policy's name (`strict`: no '/'
/// and no ".json") is `<policies_dir>/strict.json`; anything else is a path.
std::string resolve_policy_argument(const install_layout& layout, const std::string& argument);

/// Looks beside /proc/self/exe (and in ../bin, ../share/castellan), honouring
/// the CASTELLAN_WORKER and CASTELLAN_HARNESS environment variables first.
/// Nothing is compiled in: a build tree (build/bin, build/share/castellan) and
/// an install (<prefix>/bin, <prefix>/share/castellan) have the same layout.
outcome<install_layout> find_install_layout();

} // namespace castellan::platform
