#pragma once

/// @file tokens_loader.hpp
/// Reading and checking the API's tokens file (`auth.tokens_file`): TOML,
/// one `[[tokens]]` table per token,
///
///     [[tokens]]
///     name = "ci"             # shown in logs, never the secret
///     sha256 = "<64 hex>"     # the SHA-256 of the token
///     pools = ["default"]     # the pools it may use; absent: all
///     max_concurrent = 8      # its execs in flight at once; absent: no limit
///
/// with the config loader's rules: every problem reported as a
/// config_error (file:line:column: key path: value: what), unknown keys
/// refused. The file's permissions are the config loader's to check.

#include <string>
#include <string_view>
#include <vector>

#include "actors/api/access_control.hpp"
#include "config/config_error.hpp"

namespace castellan::config {

/// A tokens file as loaded: valid when `errors` is empty.
struct tokens_load {
  std::vector<api::token_entry> tokens;
  std::vector<config_error> errors;

  bool ok() const noexcept { return errors.empty(); }
};

/// Checks `text` as the tokens file `source`; `pools` are the names of the
/// config's pools, which the tokens' allowlists must name.
tokens_load parse_tokens_file(std::string_view text, const std::string& source,
                              const std::vector<std::string>& pools);

/// Reads and checks the file `path` (at most 1 MiB).
tokens_load load_tokens_file(const std::string& path, const std::vector<std::string>& pools);

} // namespace castellan::config
