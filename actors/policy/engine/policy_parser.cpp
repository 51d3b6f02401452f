#include "actors/policy/engine/policy_parser.hpp"

#include <map>
#include <string>

#include "actors/policy/engine/host_pattern.hpp"
#include "actors/policy/engine/json_reader.hpp"
#include "actors/policy/engine/path.hpp"
#include "actors/policy/engine/schema_validator.hpp"
#include "actors/policy/engine/syscall_names.hpp"

namespace castellan::policy {

namespace {

using json = nlohmann::json;

bool is_hex(char c) noexcept {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

bool is_name_char(char c) noexcept {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

/// Walks the document defensively (the schema may have failed: anything can
/// have the wrong type), collecting semantic errors and building the model.
class converter {
public:
  explicit converter(std::string_view file) : file_(file) {}

  std::vector<policy_error> errors;

  policy_document run(const json& doc) {
    policy_document out;
    out.source = file_;
    if (!doc.is_object())
      return out;
    if (auto it = doc.find("description"); it != doc.end() && it->is_string())
      out.description = it->get<std::string>();
    read_extends(doc, out);
    read_plugins(doc, out);
    read_defaults(doc, out);
    read_fs(doc, out);
    read_net(doc, out);
    read_exec(doc, out);
    if (auto it = doc.find("antiEscape"); it != doc.end() && it->is_object())
      out.deny_syscalls = read_syscalls(*it, "denySyscalls", "/antiEscape/denySyscalls");
    if (auto it = doc.find("audit"); it != doc.end() && it->is_object()) {
      if (auto en = it->find("enabled"); en != it->end() && en->is_boolean())
        out.audit.enabled = en->get<bool>();
      out.audit.events = read_syscalls(*it, "events", "/audit/events");
    }
    read_limits(doc, out);
    return out;
  }

private:
  void fail(std::string pointer, const json& value, std::string message) {
    errors.push_back(policy_error{std::string{file_}, std::move(pointer), render_value(value),
                                  std::move(message)});
  }

  std::string origin(const std::string& pointer) const {
    return std::string{file_} + "#" + pointer;
  }

  static std::optional<action> get_action(const json& obj) {
    auto it = obj.find("action");
    if (it == obj.end() || !it->is_string())
      return std::nullopt;
    return parse_action(it->get_ref<const std::string&>());
  }

  static const std::string* get_string(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_string())
      return nullptr;
    return &it->get_ref<const std::string&>();
  }

  static const json* get_array(const json& obj, const char* key) {
    auto it = obj.find(key);
    if (it == obj.end() || !it->is_array())
      return nullptr;
    return &*it;
  }

  // Reports the second and later occurrences of a string in an array.
  void check_unique(const json& arr, const std::string& pointer) {
    std::map<std::string, size_t> seen;
    for (size_t i = 0; i < arr.size(); ++i) {
      if (!arr[i].is_string())
        continue;
      auto [it, fresh] = seen.emplace(arr[i].get<std::string>(), i);
      if (!fresh)
        fail(pointer + "/" + std::to_string(i), arr[i],
             "duplicate of item " + std::to_string(it->second) + " (unique)");
    }
  }

  void read_extends(const json& doc, policy_document& out) {
    const json* arr = get_array(doc, "extends");
    if (!arr)
      return;
    check_unique(*arr, "/extends");
    for (size_t i = 0; i < arr->size(); ++i) {
      const json& v = (*arr)[i];
      if (!v.is_string())
        continue;
      const std::string& e = v.get_ref<const std::string&>();
      const std::string ptr = "/extends/" + std::to_string(i);
      if (e.empty())
        continue;
      if (e.find('\0') != std::string::npos) {
        fail(ptr, v, "contains a NUL byte (extends)");
        continue;
      }
      if (!is_extends_path(e)) {
        bool ok = e.front() != '.' && e.front() != '-';
        for (char c : e)
          ok = ok && is_name_char(c);
        if (!ok) {
          fail(ptr, v,
               "not a policy name ([A-Za-z0-9_][A-Za-z0-9._-]*) or a path (contains '/' or "
               "ends in .json) (extends)");
          continue;
        }
      }
      out.extends.push_back(e);
    }
  }

  void read_plugins(const json& doc, policy_document& out) {
    auto it = doc.find("plugins");
    if (it == doc.end() || !it->is_object())
      return;
    auto one = [&](const char* key, std::optional<plugin_setting>& slot) {
      auto p = it->find(key);
      if (p == it->end())
        return;
      if (p->is_boolean()) {
        slot = plugin_setting{p->get<bool>(), false, false};
      } else if (p->is_object()) {
        plugin_setting s;
        s.object_form = true;
        if (auto en = p->find("enabled"); en != p->end() && en->is_boolean())
          s.enabled = en->get<bool>();
        if (auto be = p->find("best_effort"); be != p->end() && be->is_boolean())
          s.best_effort = be->get<bool>();
        slot = s;
      }
    };
    one("namespaces", out.plugins.namespaces);
    one("landlock", out.plugins.landlock);
    one("seccomp", out.plugins.seccomp);
    one("cgroups", out.plugins.cgroups);
  }

  void read_defaults(const json& doc, policy_document& out) {
    auto it = doc.find("defaults");
    if (it == doc.end() || !it->is_object())
      return;
    auto one = [&](const char* key, std::optional<action>& slot) {
      if (auto s = get_string(*it, key))
        slot = parse_action(*s);
    };
    one("fs", out.defaults.fs);
    one("net", out.defaults.net);
    one("exec", out.defaults.exec);
  }

  // Checks a rule path; returns the normalised pattern or nothing.
  std::optional<std::string> read_path(const json& rule, const std::string& pointer) {
    const std::string* path = get_string(rule, "path");
    if (!path)
      return std::nullopt;
    if (auto why = check_path_pattern(*path)) {
      fail(pointer + "/path", rule["path"], *why + " (path)");
      return std::nullopt;
    }
    return normalize_pattern(*path);
  }

  void read_fs(const json& doc, policy_document& out) {
    auto sec = doc.find("fs");
    if (sec == doc.end() || !sec->is_object())
      return;
    const json* rules = get_array(*sec, "rules");
    if (!rules)
      return;
    for (size_t i = 0; i < rules->size(); ++i) {
      const json& r = (*rules)[i];
      const std::string ptr = "/fs/rules/" + std::to_string(i);
      if (!r.is_object())
        continue;
      fs_rule rule;
      auto act = get_action(r);
      auto path = read_path(r, ptr);
      const json* perms = get_array(r, "perms");
      bool ok = act && path && perms && !perms->empty();
      if (perms) {
        check_unique(*perms, ptr + "/perms");
        for (const auto& p : *perms) {
          auto mask = p.is_string() ? parse_fs_perm(p.get_ref<const std::string&>()) : std::nullopt;
          if (!mask) {
            ok = false; // the schema names it
            continue;
          }
          rule.perms |= *mask;
          rule.perm_names.push_back(p.get<std::string>());
        }
      }
      if (!ok)
        continue;
      rule.verdict = *act;
      rule.path = *path;
      rule.origin = origin(ptr);
      out.fs_rules.push_back(std::move(rule));
    }
  }

  void read_net(const json& doc, policy_document& out) {
    auto sec = doc.find("net");
    if (sec == doc.end() || !sec->is_object())
      return;
    if (const json* rules = get_array(*sec, "rules")) {
      for (size_t i = 0; i < rules->size(); ++i) {
        const json& r = (*rules)[i];
        const std::string ptr = "/net/rules/" + std::to_string(i);
        if (!r.is_object())
          continue;
        net_rule rule;
        auto act = get_action(r);
        const std::string* proto = get_string(r, "proto");
        auto p = proto ? parse_net_proto(*proto) : std::nullopt;
        bool ok = act.has_value() && p.has_value();
        if (const std::string* cidr = get_string(r, "cidr")) {
          auto c = parse_cidr(*cidr);
          if (!c) {
            fail(ptr + "/cidr", r["cidr"], c.error().message + " (cidr)");
            ok = false;
          } else {
            rule.cidr = *c;
            rule.cidr_text = to_string(*c);
          }
        } else {
          ok = false;
        }
        if (const std::string* ports = get_string(r, "ports")) {
          auto parsed = parse_port_spec(*ports);
          if (!parsed) {
            fail(ptr + "/ports", r["ports"], parsed.error().message + " (ports)");
            ok = false;
          } else {
            rule.ports = std::move(*parsed);
            rule.ports_text = *ports;
          }
        } else {
          ok = false;
        }
        if (!ok)
          continue;
        rule.verdict = *act;
        rule.proto = *p;
        rule.origin = origin(ptr);
        out.net_rules.push_back(std::move(rule));
      }
    }
    auto hosts = sec->find("hosts");
    if (hosts == sec->end() || !hosts->is_object())
      return;
    auto list = [&](const char* key, std::vector<std::string>& patterns,
                    std::vector<std::string>& origins) {
      const json* arr = get_array(*hosts, key);
      if (!arr)
        return false;
      const std::string base = std::string{"/net/hosts/"} + key;
      for (size_t i = 0; i < arr->size(); ++i) {
        const json& v = (*arr)[i];
        if (!v.is_string() || v.get_ref<const std::string&>().empty())
          continue; // the schema reports it
        const std::string ptr = base + "/" + std::to_string(i);
        if (auto why = check_host_pattern(v.get_ref<const std::string&>())) {
          fail(ptr, v, *why + " (host)");
          continue;
        }
        patterns.push_back(normalize_host(v.get_ref<const std::string&>()));
        origins.push_back(origin(ptr));
      }
      return true;
    };
    std::vector<std::string> allow;
    if (list("allow", allow, out.hosts.allow_origins))
      out.hosts.allow = std::move(allow);
    list("deny", out.hosts.deny, out.hosts.deny_origins);
  }

  void read_exec(const json& doc, policy_document& out) {
    auto sec = doc.find("exec");
    if (sec == doc.end() || !sec->is_object())
      return;
    const json* rules = get_array(*sec, "rules");
    if (!rules)
      return;
    for (size_t i = 0; i < rules->size(); ++i) {
      const json& r = (*rules)[i];
      const std::string ptr = "/exec/rules/" + std::to_string(i);
      if (!r.is_object())
        continue;
      exec_rule rule;
      auto act = get_action(r);
      auto path = read_path(r, ptr);
      bool ok = act && path;
      if (auto it = r.find("sha256"); it != r.end()) {
        if (!it->is_string()) {
          ok = false;
        } else {
          std::string digest = it->get<std::string>();
          bool hex = true;
          for (auto& c : digest) {
            hex = hex && is_hex(c);
            if (c >= 'A' && c <= 'F')
              c = static_cast<char>(c - 'A' + 'a');
          }
          if (digest.size() != 64) {
            ok = false; // the schema reports the length
          } else if (!hex) {
            fail(ptr + "/sha256", *it, "must be 64 hexadecimal digits (sha256)");
            ok = false;
          } else {
            rule.sha256 = std::move(digest);
          }
        }
      }
      if (!ok)
        continue;
      rule.verdict = *act;
      rule.path = *path;
      rule.origin = origin(ptr);
      out.exec_rules.push_back(std::move(rule));
    }
  }

  std::vector<std::string> read_syscalls(const json& sec, const char* key,
                                         const std::string& pointer) {
    std::vector<std::string> out;
    const json* arr = get_array(sec, key);
    if (!arr)
      return out;
    check_unique(*arr, pointer);
    for (size_t i = 0; i < arr->size(); ++i) {
      const json& v = (*arr)[i];
      if (!v.is_string())
        continue;
      const std::string& name = v.get_ref<const std::string&>();
      if (!is_known_syscall(name)) {
        fail(pointer + "/" + std::to_string(i), v, "not a syscall name libseccomp knows (syscall)");
        continue;
      }
      out.push_back(name);
    }
    return out;
  }

  void read_limits(const json& doc, policy_document& out) {
    auto sec = doc.find("limits");
    if (sec == doc.end() || !sec->is_object())
      return;
    auto one = [&](const char* key, std::optional<uint64_t>& slot) {
      auto it = sec->find(key);
      if (it == sec->end())
        return;
      if (it->is_number_unsigned())
        slot = it->get<uint64_t>();
      else if (it->is_number_integer() && it->get<int64_t>() >= 0)
        slot = static_cast<uint64_t>(it->get<int64_t>());
    };
    one("timeout_ms", out.limits.timeout_ms);
    one("memory_bytes", out.limits.memory_bytes);
    one("pids", out.limits.pids);
    one("cpu_percent", out.limits.cpu_percent);
    one("stdout_bytes", out.limits.stdout_bytes);
    one("stderr_bytes", out.limits.stderr_bytes);
    one("code_bytes", out.limits.code_bytes);
  }

  std::string_view file_;
};

} // namespace

bool is_extends_path(std::string_view entry) noexcept {
  if (entry.find('/') != std::string_view::npos)
    return true;
  constexpr std::string_view ext = ".json";
  return entry.size() >= ext.size() && entry.substr(entry.size() - ext.size()) == ext;
}

validated<policy_document> parse_policy_json(const nlohmann::json& doc, std::string_view file) {
  try {
    auto errors = validate_against_schema(doc, file);
    converter conv{file};
    policy_document out = conv.run(doc);
    errors.insert(errors.end(), conv.errors.begin(), conv.errors.end());
    if (!errors.empty())
      return errors;
    return out;
  } catch (const std::exception& ex) {
    // Out of memory or a library defect: still an answer, never a crash.
    return policy_error{std::string{file}, "", "",
                        std::string{"cannot check policy: "} + ex.what()};
  }
}

validated<policy_document> parse_policy(std::string_view text, std::string_view file) {
  auto doc = read_json(text, file);
  if (!doc)
    return doc.errors();
  return parse_policy_json(*doc, file);
}

} // namespace castellan::policy
