/// @file launch_request.cpp
/// JSON for the pool ↔ launcher messages (see launch_request.hpp).

#include "platform/linux/launch_request.hpp"

#include <nlohmann/json.hpp>

#include "platform/linux/json_object_reader.hpp"

namespace castellan::platform {

namespace {

using json = nlohmann::json;

/// The namespaces by name, in the order of both tables.
constexpr const char* namespace_keys[] = {"user", "pid", "mount", "net", "ipc", "uts", "cgroup"};
constexpr bool namespace_set::*namespace_members[] = {
  &namespace_set::user, &namespace_set::pid, &namespace_set::mount, &namespace_set::net,
  &namespace_set::ipc,  &namespace_set::uts, &namespace_set::cgroup};

} // namespace

outcome<std::string> encode_launch_request(const worker_spec& spec) {
  if (!spec.mounts.empty())
    return logic_failure("launch request: a launched worker's mounts come from its sandbox "
                         "spec; spec.mounts must be empty");
  json fds = json::array();
  for (const auto& m : spec.fds)
    fds.push_back(m.child_fd);
  json ns = json::object();
  for (std::size_t i = 0; i < 7; ++i)
    ns[namespace_keys[i]] = spec.namespaces.*namespace_members[i];
  json j{{"executable", spec.executable},
         {"argv", spec.argv},
         {"env", spec.env},
         {"fds", fds},
         {"isolation", spec.isolation == isolation_mode::namespaces ? "namespaces" : "none"},
         {"namespaces", ns},
         {"hostname", spec.hostname},
         {"limits",
          {{"memory_bytes", spec.limits.memory_bytes},
           {"pids", spec.limits.pids},
           {"cpu_percent", spec.limits.cpu_percent}}},
         {"die_with_parent", spec.die_with_parent},
         {"ids",
          {{"inside_uid", spec.ids.inside_uid},
           {"inside_gid", spec.ids.inside_gid},
           {"outside_uid", spec.ids.outside_uid},
           {"outside_gid", spec.ids.outside_gid}}},
         {"cgroup",
          {{"directories", spec.cgroup.directories}, {"clone_into", spec.cgroup.clone_into}}},
         {"setup_capabilities", spec.setup_capabilities},
         {"memfd_noexec", spec.memfd_noexec}};
  std::string text;
  try {
    text = j.dump();
  } catch (const json::type_error& e) {
    return logic_failure(std::string("launch request: a path or name is not UTF-8: ") + e.what());
  }
  if (text.size() > max_launch_message)
    return logic_failure("launch request: " + std::to_string(text.size()) +
                         " bytes, more than the limit of " + std::to_string(max_launch_message));
  return text;
}

outcome<worker_spec> decode_launch_request(std::string_view text,
                                           const std::vector<unique_fd>& received) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded())
    return logic_failure("launch request: not valid JSON");
  std::string err;
  worker_spec spec;
  object_reader o(j, "", err);
  o.require({"executable", "argv", "env", "fds", "isolation", "namespaces", "hostname", "limits",
             "die_with_parent", "ids", "cgroup", "setup_capabilities", "memfd_noexec"});
  o.string("executable", spec.executable);
  o.strings("argv", spec.argv);
  o.strings("env", spec.env);
  std::vector<int> targets;
  o.array("fds", [&](const json& e, const std::string& path) {
    if (!e.is_number_integer() || e.get<int64_t>() < 0 || e.get<int64_t>() > 1 << 20)
      o.fail(path, "expected an fd number");
    else
      targets.push_back(e.get<int>());
  });
  std::string isolation;
  o.string("isolation", isolation);
  if (err.empty() && isolation != "namespaces" && isolation != "none")
    o.fail("/isolation", "'" + isolation + "' is not namespaces or none");
  spec.isolation = isolation == "namespaces" ? isolation_mode::namespaces : isolation_mode::none;
  if (const json* n = o.object("namespaces")) {
    object_reader x(*n, "/namespaces", err);
    x.require({namespace_keys[0], namespace_keys[1], namespace_keys[2], namespace_keys[3],
               namespace_keys[4], namespace_keys[5], namespace_keys[6]});
    for (std::size_t i = 0; i < 7; ++i)
      x.boolean(namespace_keys[i], spec.namespaces.*namespace_members[i]);
    x.finish();
  }
  o.string("hostname", spec.hostname);
  if (const json* l = o.object("limits")) {
    object_reader x(*l, "/limits", err);
    x.require({"memory_bytes", "pids", "cpu_percent"});
    x.unsigned_number("memory_bytes", spec.limits.memory_bytes);
    x.unsigned_number("pids", spec.limits.pids);
    x.unsigned_number("cpu_percent", spec.limits.cpu_percent);
    x.finish();
  }
  o.boolean("die_with_parent", spec.die_with_parent);
  if (const json* i = o.object("ids")) {
    object_reader x(*i, "/ids", err);
    x.require({"inside_uid", "inside_gid", "outside_uid", "outside_gid"});
    x.unsigned_number("inside_uid", spec.ids.inside_uid);
    x.unsigned_number("inside_gid", spec.ids.inside_gid);
    x.signed_number("outside_uid", spec.ids.outside_uid);
    x.signed_number("outside_gid", spec.ids.outside_gid);
    x.finish();
  }
  if (const json* c = o.object("cgroup")) {
    object_reader x(*c, "/cgroup", err);
    x.require({"directories", "clone_into"});
    x.strings("directories", spec.cgroup.directories);
    x.string("clone_into", spec.cgroup.clone_into);
    x.finish();
  }
  o.boolean("setup_capabilities", spec.setup_capabilities);
  o.boolean("memfd_noexec", spec.memfd_noexec);
  o.finish();
  if (!err.empty())
    return logic_failure("launch request: " + err);
  if (targets.size() != received.size())
    return logic_failure("launch request: it maps " + std::to_string(targets.size()) +
                         " fds but " + std::to_string(received.size()) + " arrived");
  for (std::size_t k = 0; k < targets.size(); ++k)
    spec.fds.push_back({received[k].get(), targets[k]});
  return spec;
}

std::string encode_launch_reply(const launch_reply& reply) {
  switch (reply.what) {
    case launch_reply::kind::ready:
      return json{{"ready", reply.pid}}.dump();
    case launch_reply::kind::cloned:
      return json{{"cloned", reply.pid}}.dump();
    case launch_reply::kind::started:
      return json{{"pid", reply.pid}}.dump();
    case launch_reply::kind::failed:
      break;
  }
  return json{{"error", reply.error}, {"errno", reply.error_code}}.dump();
}

outcome<launch_reply> decode_launch_reply(std::string_view text) {
  const json j = json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded())
    return logic_failure("launcher reply: not valid JSON");
  std::string err;
  object_reader o(j, "", err);
  launch_reply r;
  if (j.is_object() && j.contains("error")) {
    r.what = launch_reply::kind::failed;
    o.require({"error", "errno"});
    o.string("error", r.error);
    o.signed_number("errno", r.error_code);
    if (err.empty() && r.error.empty())
      o.fail("/error", "empty");
  } else {
    const bool ready = j.is_object() && j.contains("ready");
    const bool cloned = j.is_object() && j.contains("cloned");
    const char* key = ready ? "ready" : cloned ? "cloned" : "pid";
    r.what = ready    ? launch_reply::kind::ready
             : cloned ? launch_reply::kind::cloned
                      : launch_reply::kind::started;
    o.require({key});
    o.signed_number(key, r.pid);
    if (err.empty() && r.pid <= 0)
      o.fail(std::string("/") + key, std::to_string(r.pid) + " is not a process");
  }
  o.finish();
  if (!err.empty())
    return logic_failure("launcher reply: " + err);
  return r;
}

} // namespace castellan::platform
