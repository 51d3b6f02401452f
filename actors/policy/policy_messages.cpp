#include "actors/policy/policy_messages.hpp"

#include "actors/errors.hpp"
#include "actors/policy/engine/policy_parser.hpp"

namespace castellan {

namespace {

std::string_view source_name(policy::decision_source s) {
  switch (s) {
  case policy::decision_source::default_action:
    return "default";
  case policy::decision_source::rule:
    return "rule";
  case policy::decision_source::host_deny:
    return "host_deny";
  case policy::decision_source::host_allow:
    return "host_allow";
  case policy::decision_source::host_not_allowed:
    return "host_not_allowed";
  case policy::decision_source::invalid_query:
    return "invalid";
  }
  return "invalid";
}

} // namespace

caf::error restore_policy_snapshot(policy_snapshot& x, const std::string& name, uint64_t revision,
                                   const std::string& json_text) {
  if (json_text.empty()) {
    x.policy.reset();
    return caf::none;
  }
  // A peer's snapshot is input like any file: validate before compiling.
  auto doc = policy::parse_policy(json_text, "<snapshot " + name + ">");
  if (!doc)
    return make_error(castellan_errc::policy_invalid, doc.to_failure());
  if (!doc->extends.empty())
    return make_error(castellan_errc::policy_invalid, "snapshot " + name + " has extends");
  x.policy = policy::compiled_policy::compile(std::move(*doc), name, revision);
  return caf::none;
}

policy_decision make_policy_decision(const policy::compiled_policy& snapshot,
                                     const policy::decision& d) {
  policy_decision out;
  out.policy = snapshot.name();
  out.revision = snapshot.revision();
  out.action = std::string{policy::to_string(d.verdict)};
  out.rule = std::string{d.pointer};
  out.source = std::string{source_name(d.source)};
  const auto& doc = snapshot.document();
  if (d.index >= 0) {
    const auto i = static_cast<size_t>(d.index);
    const std::string_view p = d.pointer;
    if (d.source == policy::decision_source::rule) {
      if (p.rfind("/fs/", 0) == 0 && i < doc.fs_rules.size())
        out.origin = doc.fs_rules[i].origin;
      else if (p.rfind("/net/", 0) == 0 && i < doc.net_rules.size())
        out.origin = doc.net_rules[i].origin;
      else if (p.rfind("/exec/", 0) == 0 && i < doc.exec_rules.size())
        out.origin = doc.exec_rules[i].origin;
    } else if (d.source == policy::decision_source::host_deny &&
               i < doc.hosts.deny_origins.size()) {
      out.origin = doc.hosts.deny_origins[i];
    } else if (d.source == policy::decision_source::host_allow &&
               i < doc.hosts.allow_origins.size()) {
      out.origin = doc.hosts.allow_origins[i];
    }
  }
  return out;
}

} // namespace castellan
