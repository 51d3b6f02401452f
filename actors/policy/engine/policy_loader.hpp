#pragma once

/// @file policy_loader.hpp
/// Loading policy files and resolving `extends`.
///
/// An `extends` entry that is a name ("net-egress") resolves to
/// `<policy_dir>/<name>.json`; an entry that is a path ("../base.json",
/// "shared/x.json") resolves relative to the directory of the file that names
/// it. The extended policies are merged under the file, in the order listed,
/// each after its own extends (depth first); a file reached twice (a diamond)
/// is merged once, at its first position. A cycle is an error that names the
/// files around it.

#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/policy_document.hpp"
#include "actors/policy/engine/policy_error.hpp"

namespace castellan::policy {

/// At most this many files take part in one policy (the file and everything
/// it extends, transitively).
inline constexpr size_t max_extends_layers = 64;

/// Reads and checks one file, without resolving its `extends`.
validated<policy_document> read_policy_file(const std::string& path);

/// The layers of `path`, bottom first: everything it extends (transitively,
/// depth first, each file once), then the file itself.
validated<std::vector<policy_document>> load_policy_layers(const std::string& path,
                                                           const std::string& policy_dir);

/// Loads `path` with everything it extends merged under it: the effective
/// policy (its `extends` is empty, its source is `path`).
validated<policy_document> load_policy(const std::string& path, const std::string& policy_dir);

/// Resolves the `extends` of an already-parsed policy whose relative paths
/// are relative to `base_dir`. When `files_read` is given, it receives the
/// path of every file that took part (to notice later that one changed).
validated<policy_document> resolve_extends(const policy_document& doc, const std::string& base_dir,
                                           const std::string& policy_dir,
                                           std::vector<std::string>* files_read = nullptr);

/// The directory part of `path` ("." when it has none).
std::string parent_directory(const std::string& path);

} // namespace castellan::policy
