/// @file launch_request.cpp
/// JSON for the pool ↔ launcher messages (see launch_request.hpp).

#include "platform/linux/launch_request.hpp"

#include <nlohmann/json.hpp>

namespace castellan::platform {

namespace {

using json = nlohmann::json;

/// Reads `key` of `obj` as T, or says which field is missing or mistyped.
template <class T>
T field(const json& obj, const char* key, const char* where) {
  auto it = obj.find(key);
  if (it == obj.end())
    throw std::invalid_argument(std::string(where) + ": missing \"" + key + "\"");
  try {
    return it->get<T>();
  } catch (const json::exception&) {
    throw std::invalid_argument(std::string(where) + ": \"" + key + "\" has the wrong type (" +
                                it->type_name() + ")");
  }
}

json to_json(const namespace_set& ns) {
  return {ns.user, ns.pid, ns.mount, ns.net, ns.ipc, ns.uts, ns.cgroup};
}

namespace_set namespaces_from(const json& j) {
  if (!j.is_array() || j.size() != 7)
    throw std::invalid_argument("request: \"namespaces\" must be an array of 7 booleans");
  bool v[7];
  for (std::size_t i = 0; i < 7; ++i) {
    if (!j[i].is_boolean())
      throw std::invalid_argument("request: \"namespaces\"[" + std::to_string(i) +
                                  "] is not a boolean");
    v[i] = j[i].get<bool>();
  }
  return {v[0], v[1], v[2], v[3], v[4], v[5], v[6]};
}

} // namespace

outcome<std::string> encode_launch_request(const worker_spec& spec) {
  if (!spec.mounts.empty())
    return logic_failure("launch request: a launched worker's mounts come from its sandbox "
                         "spec; spec.mounts must be empty");
  json fds = json::array();
  for (const auto& m : spec.fds)
    fds.push_back(m.child_fd);
  json j{{"executable", spec.executable},
         {"argv", spec.argv},
         {"env", spec.env},
         {"fds", fds},
         {"isolation", spec.isolation == isolation_mode::namespaces ? "namespaces" : "none"},
         {"namespaces", to_json(spec.namespaces)},
         {"hostname", spec.hostname},
         {"limits", {spec.limits.memory_bytes, spec.limits.pids, spec.limits.cpu_percent}},
         {"die_with_parent", spec.die_with_parent},
         {"ids",
          {spec.ids.inside_uid, spec.ids.inside_gid, spec.ids.outside_uid, spec.ids.outside_gid}},
         {"cgroup_directories", spec.cgroup.directories},
         {"cgroup_clone_into", spec.cgroup.clone_into},
         {"setup_capabilities", spec.setup_capabilities}};
  std::string text = j.dump();
  if (text.size() > max_launch_message)
    return logic_failure("launch request: " + std::to_string(text.size()) +
                         " bytes, more than the limit of " + std::to_string(max_launch_message));
  return text;
}

outcome<worker_spec> decode_launch_request(std::string_view text,
                                           const std::vector<unique_fd>& received) {
  try {
    const json j = json::parse(text);
    if (!j.is_object())
      return logic_failure("launch request: not a JSON object");
    worker_spec spec;
    spec.executable = field<std::string>(j, "executable", "launch request");
    spec.argv = field<std::vector<std::string>>(j, "argv", "launch request");
    spec.env = field<std::vector<std::string>>(j, "env", "launch request");
    const auto targets = field<std::vector<int>>(j, "fds", "launch request");
    if (targets.size() != received.size())
      return logic_failure("launch request: it maps " + std::to_string(targets.size()) +
                           " fds but " + std::to_string(received.size()) + " arrived");
    for (std::size_t i = 0; i < targets.size(); ++i)
      spec.fds.push_back({received[i].get(), targets[i]});
    const auto isolation = field<std::string>(j, "isolation", "launch request");
    if (isolation != "namespaces" && isolation != "none")
      return logic_failure("launch request: \"isolation\" is '" + isolation +
                           "', not namespaces or none");
    spec.isolation =
      isolation == "namespaces" ? isolation_mode::namespaces : isolation_mode::none;
    spec.namespaces = namespaces_from(j.at("namespaces"));
    spec.hostname = field<std::string>(j, "hostname", "launch request");
    const auto limits = field<std::vector<uint64_t>>(j, "limits", "launch request");
    if (limits.size() != 3 || limits[1] > UINT32_MAX || limits[2] > UINT32_MAX)
      return logic_failure("launch request: \"limits\" must be [memory bytes, pids, cpu %]");
    spec.limits = {limits[0], static_cast<uint32_t>(limits[1]), static_cast<uint32_t>(limits[2])};
    spec.die_with_parent = field<bool>(j, "die_with_parent", "launch request");
    const auto ids = field<std::vector<int64_t>>(j, "ids", "launch request");
    if (ids.size() != 4 || ids[0] < 0 || ids[0] > UINT32_MAX || ids[1] < 0 ||
        ids[1] > UINT32_MAX)
      return logic_failure("launch request: \"ids\" must be [inside uid, inside gid, outside "
                           "uid, outside gid]");
    spec.ids = {static_cast<uint32_t>(ids[0]), static_cast<uint32_t>(ids[1]), ids[2], ids[3]};
    spec.cgroup.directories =
      field<std::vector<std::string>>(j, "cgroup_directories", "launch request");
    spec.cgroup.clone_into = field<std::string>(j, "cgroup_clone_into", "launch request");
    spec.setup_capabilities = field<bool>(j, "setup_capabilities", "launch request");
    return spec;
  } catch (const std::exception& e) {
    return logic_failure(std::string("launch request: ") + e.what());
  }
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
  try {
    const json j = json::parse(text);
    if (!j.is_object() || j.size() == 0)
      return logic_failure("launcher reply: not a non-empty JSON object");
    launch_reply r;
    if (j.contains("error")) {
      r.what = launch_reply::kind::failed;
      r.error = field<std::string>(j, "error", "launcher reply");
      if (r.error.empty())
        return logic_failure("launcher reply: an empty \"error\"");
      r.error_code = field<int>(j, "errno", "launcher reply");
      return r;
    }
    const char* key = j.contains("ready")    ? "ready"
                      : j.contains("cloned") ? "cloned"
                                             : "pid";
    r.what = j.contains("ready")    ? launch_reply::kind::ready
             : j.contains("cloned") ? launch_reply::kind::cloned
                                    : launch_reply::kind::started;
    r.pid = field<pid_t>(j, key, "launcher reply");
    if (r.pid <= 0)
      return logic_failure("launcher reply: pid " + std::to_string(r.pid) + " is not a process");
    return r;
  } catch (const std::exception& e) {
    return logic_failure(std::string("launcher reply: ") + e.what());
  }
}

} // namespace castellan::platform
