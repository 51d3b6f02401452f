#pragma once

/// @file policy_directory.hpp
/// A directory of policies: every `*.json` file except `schema.json` is a
/// policy named after its file ("policies/net-egress.json" → "net-egress").

#include <string>
#include <vector>

#include "ipc/outcome.hpp"

namespace castellan::policy {

/// The policy files of `dir`, sorted by name; a failure if `dir` cannot be read.
outcome<std::vector<std::string>> list_policy_files(const std::string& dir);

/// The name of the policy in `path`: its file name without ".json".
std::string policy_name_of(const std::string& path);

/// True for a file name that names a policy ("x.json", not "schema.json",
/// not hidden, not an editor's temporary file).
bool is_policy_file_name(const std::string& file_name);

} // namespace castellan::policy
