#pragma once

/// @file policy_explainer.hpp
/// What a policy decides, as `castellan policy explain` and the daemon's
/// `POST /v1/policies/explain` report it: a query (fs, net or exec) in its
/// text form, decided by the policy inside the sandbox a pool builds from
/// it (the same Landlock rights, mediation and egress relay its workers
/// get: sandbox_fs_rights.hpp, sandbox_net_rights.hpp), with what decided;
/// and the warnings `castellan policy check` adds to a valid policy. One
/// place, so that the command and the API never disagree.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "actors/policy/engine/compiled_policy.hpp"
#include "ipc/outcome.hpp"
#include "platform/linux/sandbox_spec.hpp"

namespace castellan {

/// The three kinds of query.
enum class explain_kind : uint8_t { fs, net, exec };

/// "fs", "net", "exec".
std::string_view to_string(explain_kind kind);

/// The syntax of a query of `kind`, for messages: "PERM[,PERM…]:PATH",
/// "[connect:|bind:|relay:]PROTO:ADDR:PORT[:HOST] (IPv6 as [ADDR])",
/// "PATH[:SHA256]".
std::string explain_syntax(explain_kind kind);

/// One decided query.
struct explanation {
  explain_kind kind = explain_kind::fs;
  std::string query; ///< as asked
  policy::action verdict = policy::action::deny;
  /// What decided: the JSON pointer of the deciding entry of the effective
  /// policy ("/fs/rules/3", "/net/hosts/deny/0", "/net/hosts/allow"),
  /// "default", "invalid"; or, when the sandbox decides otherwise than the
  /// policy alone would, the sandbox's reason ("sandbox: …",
  /// "egress proxy: …", "castellan base: …").
  std::string by;
  /// The kind of thing that decided (meaningful when !by_sandbox).
  policy::decision_source source = policy::decision_source::invalid_query;
  bool by_sandbox = false; ///< `by` is the sandbox's reason, not the policy's
  /// The file and rule the deciding rule came from in a merged policy
  /// (`extends`), when the policy recorded it.
  std::string origin;
};

/// A compiled policy and the sandbox a pool builds from it, asked queries.
class policy_explainer {
public:
  explicit policy_explainer(std::shared_ptr<const policy::compiled_policy> policy);

  /// Decides `query`; a failure naming the syntax wanted when the query is
  /// malformed.
  outcome<explanation> explain(explain_kind kind, const std::string& query) const;

  const policy::compiled_policy& policy() const noexcept { return *policy_; }

private:
  std::shared_ptr<const policy::compiled_policy> policy_;
  std::optional<platform::sandbox_spec> sandbox_; ///< none: the policy runs without one
};

/// The sandbox a pool builds from `doc` (none when the policy runs without
/// one). A supervisor's pools always have the egress proxy, so a policy
/// that allows network gets the relay.
std::optional<platform::sandbox_spec> sandbox_of(const policy::policy_document& doc);

/// What `castellan policy check` warns of in a valid policy: binds it makes
/// writable that the host's owner and mode bits keep the sandbox's code
/// from writing.
std::vector<std::string> policy_warnings(const policy::policy_document& doc);

} // namespace castellan
