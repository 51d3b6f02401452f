#pragma once

/// @file config_loader.hpp
/// Reading and checking a castellan.toml (TOML, parsed by toml++). Every
/// problem is reported, in one pass, as a config_error: unknown keys (with a
/// "did you mean"), wrong types, numbers out of range, sizes that do not
/// parse, duplicate pool names, policies the policy directory lacks, policy
/// files that are missing or invalid, a tokens file others may read.
///
/// Relative paths are relative to the config file's directory, except
/// `audit.file`, which is relative to `state_dir`.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "config/config_error.hpp"
#include "config/serve_config.hpp"

namespace castellan::config {

/// Config files larger than this are refused unread.
inline constexpr std::size_t max_config_bytes = 1u << 20;

/// A config as loaded: valid when `errors` is empty. `warnings` are
/// things that load but may not do what the file seems to say.
struct config_load {
  serve_config config;
  std::vector<config_error> errors;
  std::vector<config_error> warnings;

  bool ok() const noexcept { return errors.empty(); }
};

/// Reads and checks the file `path`.
config_load load_serve_config(const std::string& path);

/// Checks `text` as the content of the file `source`, whose relative paths
/// are relative to `base_dir`.
config_load parse_serve_config(std::string_view text, const std::string& source,
                               const std::string& base_dir);

/// The built-in default: what an empty config file gives (one pool,
/// "default", under the policy "default"; the default socket).
config_load builtin_serve_config();

/// The line and column of the first dotted key (or table header) of more
/// than 32 dots in `text`, if any: such a key would make toml++ recurse
/// once per dot (see docs/config.md). Files of castellan's are checked with
/// it before they are parsed.
std::optional<std::pair<uint32_t, uint32_t>> find_too_deep_key(std::string_view text);

/// Every key the loader reads, as generic paths ("pools[].limits.memory"),
/// sorted: the reference docs/config.md must describe.
std::vector<std::string> known_config_keys();

} // namespace castellan::config
