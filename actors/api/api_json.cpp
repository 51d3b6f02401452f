#include "actors/api/api_json.hpp"

#include <optional>

#include <nlohmann/json.hpp>

#include "actors/api/api_error.hpp"
#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"
#include "actors/pool/exec_setup.hpp"

namespace castellan::api {

namespace {

using json = nlohmann::json;

/// The longest deadline a request may ask for: one day.
constexpr uint64_t max_timeout_ms = 24ull * 3600 * 1000;

api_error field_error(const std::string& key, std::string message) {
  return api_error{400, "invalid_field", std::move(message), "/" + key};
}

std::string type_name(const json& v) {
  return v.type_name();
}

/// Why `id` cannot name an exec, or "" when it can.
std::string exec_id_problem(const std::string& id) {
  if (id.empty() || id.size() > max_exec_id_chars)
    return "'id' must be 1 to " + std::to_string(max_exec_id_chars) + " characters long, not " +
           std::to_string(id.size());
  for (char c : id)
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
          c == '.' || c == '_' || c == '-'))
      return "'id' may contain only A-Z, a-z, 0-9, '.', '_' and '-'";
  if (id.find_first_not_of("0123456789") == std::string::npos)
    return "'id' must not be digits only: DELETE /v1/execs/<digits> names the exec_id the API "
           "assigns";
  if (id == "." || id == "..")
    return "'id' must not be '.' or '..' (clients rewrite them in a URL path)";
  return {};
}

/// `name` as one reference token of a JSON pointer (RFC 6901).
std::string pointer_token(const std::string& name) {
  std::string out;
  for (char c : name) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out.push_back(c);
  }
  return out;
}

/// The JSON pointer (without its leading '/') of the field a check_setup
/// message names: "files_in[2].path: …" → "files_in/2/path"; "env[2]: …"
/// and "cwd: …" → the field ("env" is an object in the API: its index means
/// nothing there).
std::string setup_pointer(const std::string& why) {
  const std::string head = why.substr(0, why.find(": "));
  if (head.compare(0, 5, "files") != 0)
    return why.substr(0, why.find_first_of("[:"));
  std::string out;
  for (char c : head) {
    if (c == '[' || c == '.')
      out.push_back('/');
    else if (c != ']')
      out.push_back(c);
  }
  return out;
}

/// `files_in`: `[{path, content | content_base64, mode?}]`.
std::optional<api_error> read_files_in(const json& v, std::vector<exec_file_in>& out) {
  if (!v.is_array())
    return field_error("files_in", "'files_in' must be an array of {path, content | "
                                   "content_base64, mode}, not " + type_name(v));
  if (v.size() > max_files)
    return field_error("files_in", "'files_in' has " + std::to_string(v.size()) +
                                       " files; at most " + std::to_string(max_files));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const json& f = v[i];
    const std::string at = "files_in/" + std::to_string(i);
    const std::string name = "'files_in[" + std::to_string(i) + "]";
    if (!f.is_object())
      return field_error(at, name + "' must be an object, not " + type_name(f));
    exec_file_in file;
    bool has_path = false;
    bool has_content = false;
    for (auto m = f.begin(); m != f.end(); ++m) {
      const std::string& k = m.key();
      const json& mv = m.value();
      const std::string ptr = at + "/" + pointer_token(k);
      if (k == "path") {
        if (!mv.is_string())
          return field_error(ptr, name + ".path' must be a string, not " + type_name(mv));
        file.path = mv.get<std::string>();
        has_path = true;
      } else if (k == "content" || k == "content_base64") {
        if (!mv.is_string())
          return field_error(ptr, name + "." + k + "' must be a string, not " + type_name(mv));
        if (has_content)
          return field_error(ptr, name + "': give 'content' or 'content_base64', not both");
        if (k == "content") {
          file.content = mv.get<std::string>();
        } else {
          auto bytes = base64_decode(mv.get<std::string>());
          if (!bytes)
            return field_error(ptr, name + ".content_base64' is not base64 (RFC 4648, standard "
                                           "alphabet, padded, no white space)");
          file.content = std::move(*bytes);
        }
        has_content = true;
      } else if (k == "mode") {
        if (!mv.is_number_unsigned() || mv.get<uint64_t>() > 0777)
          return field_error(ptr, name + ".mode' must be permission bits, an integer from 0 to "
                                         "511 (0777), not " + mv.dump());
        file.mode = static_cast<uint32_t>(mv.get<uint64_t>());
      } else {
        return field_error(ptr, "unknown field '" + k + "' in " + name +
                                    "' (expected path, content, content_base64, mode)");
      }
    }
    if (!has_path)
      return field_error(at + "/path", name + ".path' is missing");
    if (!has_content)
      return field_error(at + "/content", name + "' needs 'content' or 'content_base64'");
    out.push_back(std::move(file));
  }
  return std::nullopt;
}

} // namespace

std::string api_error::body() const {
  return error_body(code, message, field);
}

bool nests_deeper_than(std::string_view text, std::size_t max_depth) {
  std::size_t depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        return true;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return false;
}

std::variant<json, api_error> parse_body_object(std::string_view body) {
  if (nests_deeper_than(body, max_body_depth))
    return api_error{400, "bad_json",
                     "the body nests arrays and objects deeper than " +
                         std::to_string(max_body_depth) + " levels",
                     ""};
  json doc;
  try {
    doc = json::parse(body.begin(), body.end());
  } catch (const json::parse_error& e) {
    // "[json.exception.parse_error.101] parse error at line 1, column 2: …"
    std::string what = e.what();
    if (auto pos = what.find("] "); pos != std::string::npos)
      what = what.substr(pos + 2);
    return api_error{400, "bad_json", "the body is not valid JSON: " + what, ""};
  }
  if (!doc.is_object())
    return api_error{400, "bad_json", "the body is a JSON " + type_name(doc) + ", not an object",
                     ""};
  return doc;
}

std::variant<exec_body, api_error> parse_exec_body(std::string_view body, bool command,
                                                   bool in_session) {
  // A policy nested a million levels deep would overflow the stack of the
  // recursive dump below: the depth is checked before anything is parsed.
  auto parsed = parse_body_object(body);
  if (auto* err = std::get_if<api_error>(&parsed))
    return std::move(*err);
  const json& doc = std::get<json>(parsed);
  exec_body out;
  exec_request& req = out.request;
  bool has_main = false;
  bool has_stdin = false;
  const char* main_key = command ? "argv" : "code";
  for (auto it = doc.begin(); it != doc.end(); ++it) {
    const std::string& key = it.key();
    const json& v = it.value();
    if (key == "code" && !command) {
      if (!v.is_string())
        return field_error(key, "'code' must be a string, not " + type_name(v));
      req.code = v.get<std::string>();
      if (req.code.empty())
        return field_error(key, "'code' is empty");
      has_main = true;
    } else if (key == "argv" && command) {
      if (!v.is_array() || v.empty())
        return field_error(key, "'argv' must be a non-empty array of strings (program first)");
      for (std::size_t i = 0; i < v.size(); ++i) {
        const json& a = v[i];
        const std::string ptr = "argv/" + std::to_string(i);
        if (!a.is_string())
          return field_error(ptr, "'argv[" + std::to_string(i) + "]' must be a string, not " +
                                      type_name(a));
        auto s = a.get<std::string>();
        if (s.find('\0') != std::string::npos)
          return field_error(ptr, "'argv[" + std::to_string(i) + "]' contains a NUL byte");
        if (i == 0 && s.empty())
          return field_error(ptr, "'argv[0]' (the program) is empty");
        req.argv.push_back(std::move(s));
      }
      has_main = true;
    } else if (key == "id") {
      if (!v.is_string())
        return field_error(key, "'id' must be a string, not " + type_name(v));
      if (auto problem = exec_id_problem(v.get<std::string>()); !problem.empty())
        return field_error(key, std::move(problem));
      out.id = v.get<std::string>();
    } else if (key == "timeout_ms") {
      if (!v.is_number_unsigned() || v.get<uint64_t>() == 0 || v.get<uint64_t>() > max_timeout_ms)
        return field_error(key, "'timeout_ms' must be an integer from 1 to " +
                                    std::to_string(max_timeout_ms) + ", not " + v.dump());
      req.timeout_ms = v.get<uint64_t>();
    } else if (in_session && (key == "pool" || key == "policy")) {
      return field_error(key, "'" + key + "' is not for an exec in a session: it runs on the "
                                          "pool, and under the policy, the session was created "
                                          "with");
    } else if (key == "pool") {
      if (!v.is_string() || v.get<std::string>().empty())
        return field_error(key, "'pool' must be a non-empty string (a pool's name)");
      req.pool = v.get<std::string>();
    } else if (key == "policy") {
      if (!v.is_object())
        return field_error(key, "'policy' must be a policy document (a JSON object), not " +
                                    type_name(v));
      req.policy = v.dump();
    } else if (key == "stdin") {
      if (!v.is_string())
        return field_error(key, "'stdin' must be a string, not " + type_name(v));
      if (has_stdin)
        return field_error(key, "give 'stdin' or 'stdin_base64', not both");
      req.stdin_data = v.get<std::string>();
      has_stdin = true;
    } else if (key == "stdin_base64") {
      if (!v.is_string())
        return field_error(key, "'stdin_base64' must be a string, not " + type_name(v));
      if (has_stdin)
        return field_error(key, "give 'stdin' or 'stdin_base64', not both");
      auto bytes = base64_decode(v.get<std::string>());
      if (!bytes)
        return field_error(key, "'stdin_base64' is not base64 (RFC 4648, standard alphabet, "
                                "padded, no white space)");
      req.stdin_data = std::move(*bytes);
      has_stdin = true;
    } else if (key == "env") {
      if (!v.is_object())
        return field_error(key, "'env' must be an object of strings, not " + type_name(v));
      for (auto e = v.begin(); e != v.end(); ++e) {
        const std::string ptr = "env/" + pointer_token(e.key());
        if (!e.value().is_string())
          return field_error(ptr, "'env." + e.key() + "' must be a string, not " +
                                      type_name(e.value()));
        if (e.key().empty() || e.key().find('=') != std::string::npos ||
            e.key().find('\0') != std::string::npos)
          return field_error(ptr, "'" + e.key() +
                                      "' is not a variable name (empty, or with '=' or NUL)");
        const auto& value = e.value().get_ref<const std::string&>();
        if (value.find('\0') != std::string::npos)
          return field_error(ptr, "'env." + e.key() + "' contains a NUL byte");
        req.env.push_back(e.key() + "=" + value);
      }
    } else if (key == "cwd") {
      if (!v.is_string())
        return field_error(key, "'cwd' must be a string, not " + type_name(v));
      req.cwd = v.get<std::string>();
    } else if (key == "files_in") {
      if (auto err = read_files_in(v, req.files_in))
        return std::move(*err);
    } else if (key == "files_out") {
      if (!v.is_array())
        return field_error(key, "'files_out' must be an array of paths, not " + type_name(v));
      if (v.size() > max_files)
        return field_error(key, "'files_out' names " + std::to_string(v.size()) +
                                    " files; at most " + std::to_string(max_files));
      for (std::size_t i = 0; i < v.size(); ++i) {
        if (!v[i].is_string())
          return field_error("files_out/" + std::to_string(i),
                             "'files_out[" + std::to_string(i) + "]' must be a string, not " +
                                 type_name(v[i]));
        req.files_out.push_back(v[i].get<std::string>());
      }
    } else {
      return field_error(key, "unknown field '" + key + "' (expected " +
                                  (command ? "argv" : "code") + ", id, timeout_ms, " +
                                  (in_session ? "" : "pool, policy, ") +
                                  "stdin, stdin_base64, env, cwd, files_in, files_out)");
    }
  }
  if (!has_main)
    return field_error(main_key, std::string("the field '") + main_key + "' is missing");
  if (auto why = check_setup(req); !why.empty())
    return field_error(setup_pointer(why), why);
  return out;
}

std::string result_body(const exec_result& r, std::string_view id) {
  json j = to_json(r);
  j["v"] = 1;
  if (!id.empty())
    j["id"] = id;
  return dump_json(j);
}

namespace {

/// Appends `text` as a JSON string, byte for byte as dump_json writes it:
/// UTF-8 as is, `"` and `\` and the control characters escaped (\b \t \n
/// \f \r, the others \u00xx). Text that is not UTF-8 goes through dump_json
/// itself, whose replacement of the bad bytes this does not repeat.
void append_json_string(std::string& out, std::string_view text) {
  if (!is_utf8(text)) {
    out += dump_json(json(std::string(text)));
    return;
  }
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\b':
      out += "\\b";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\f':
      out += "\\f";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        out += "\\u00";
        out += hex[(static_cast<unsigned char>(c) >> 4) & 0xf];
        out += hex[static_cast<unsigned char>(c) & 0xf];
      } else {
        out += c;
      }
    }
  }
  out += '"';
}

/// Appends `,"key":` (the key is one of ours: nothing to escape).
void append_key(std::string& out, const char* key) {
  out += ",\"";
  out += key;
  out += "\":";
}

/// Appends an output member pair as to_json writes it: `"key":"text"` and
/// `"key_base64":bool` come apart in the sorted order, so this returns the
/// flag for the caller to write.
bool append_output(std::string& out, const std::string& bytes, bool truncated) {
  std::string_view text = bytes;
  if (truncated)
    text.remove_suffix(incomplete_utf8_tail(text));
  const bool base64 = !is_utf8(text);
  if (base64)
    append_json_string(out, base64_encode(bytes));
  else
    append_json_string(out, text);
  return base64;
}

/// result_body's members other than `enforcement`, as dump_json writes
/// them (keys sorted, as nlohmann's object keeps them), without the DOM:
/// building and dumping that object was most of the API's encoding time
/// per exec (about 15 us of a `pass`). Only for a result without events,
/// exception or files, which take the DOM path; starts with the `,` that
/// follows `enforcement`.
void append_plain_members(std::string& out, const exec_result& r, std::string_view id) {
  append_key(out, "detail");
  append_json_string(out, r.detail);
  append_key(out, "error_class");
  append_json_string(out, to_string(r.error));
  out += R"(,"events":[],"exception":null)";
  append_key(out, "exec_id");
  out += std::to_string(r.exec_id);
  append_key(out, "exit_code");
  out += std::to_string(r.exit_code);
  if (!id.empty()) {
    append_key(out, "id");
    append_json_string(out, id);
  }
  append_key(out, "stderr");
  const bool stderr_base64 = append_output(out, r.stderr_data, r.stderr_truncated);
  append_key(out, "stderr_base64");
  out += stderr_base64 ? "true" : "false";
  append_key(out, "stderr_truncated");
  out += r.stderr_truncated ? "true" : "false";
  append_key(out, "stdout");
  const bool stdout_base64 = append_output(out, r.stdout_data, r.stdout_truncated);
  append_key(out, "stdout_base64");
  out += stdout_base64 ? "true" : "false";
  append_key(out, "stdout_truncated");
  out += r.stdout_truncated ? "true" : "false";
  out += R"(,"timing":{"queue_us":)";
  out += std::to_string(r.timing.queue_us);
  out += R"(,"run_us":)";
  out += std::to_string(r.timing.run_us);
  out += R"(},"usage":{"cpu_us":)";
  out += std::to_string(r.usage.cpu_us);
  out += R"(,"peak_memory_bytes":)";
  out += std::to_string(r.usage.peak_memory_bytes);
  out += R"(},"v":1,"worker_id":)";
  out += std::to_string(r.worker_id);
  out += '}';
}

} // namespace

std::string result_encoder::body(exec_result& r, std::string_view id) {
  if (r.enforcement.empty())
    return result_body(r, id);
  const std::string* cached = nullptr;
  for (const auto& entry : cache_)
    if (entry.first == r.enforcement) {
      cached = &entry.second;
      break;
    }
  if (cached == nullptr) {
    // As to_json does it: a report that does not parse is shown as text.
    json parsed = json::parse(r.enforcement, nullptr, false);
    std::string text = dump_json(parsed.is_discarded() ? json(r.enforcement) : parsed);
    constexpr std::size_t capacity = 64;
    if (cache_.size() < capacity) {
      cache_.emplace_back(r.enforcement, std::move(text));
      cached = &cache_.back().second;
    } else {
      auto& slot = cache_[next_];
      next_ = (next_ + 1) % capacity;
      slot = {r.enforcement, std::move(text)};
      cached = &slot.second;
    }
  }
  std::string out;
  out.reserve(cached->size() + r.stdout_data.size() + r.stderr_data.size() + r.detail.size() +
              id.size() + 512);
  out += R"({"enforcement":)";
  out += *cached;
  if (r.events.empty() && !r.has_exception && r.files.empty()) {
    append_plain_members(out, r, id);
    return out;
  }
  // The rarer members go through the DOM: `rest` is an object with
  // members, `{` + its members, spliced in after the report and a `,`.
  std::string report = std::move(r.enforcement);
  r.enforcement.clear();
  json j = to_json(r);
  r.enforcement = std::move(report);
  j.erase("enforcement");
  j["v"] = 1;
  if (!id.empty())
    j["id"] = id;
  const std::string rest = dump_json(j);
  out += ',';
  out.append(rest, 1, std::string::npos);
  return out;
}

namespace {

json pools_json(const std::vector<pool_status>& pools) {
  json list = json::array();
  for (const auto& p : pools)
    list.push_back({{"name", p.name},
                    {"size", p.size},
                    {"idle", p.idle},
                    {"busy", p.busy},
                    {"starting", p.starting},
                    {"queued", p.queued},
                    {"queue_limit", p.queue_limit},
                    {"spawned", p.spawned},
                    {"completed", p.completed},
                    {"lost", p.lost},
                    {"policy", p.policy},
                    {"policy_revision", p.policy_revision}});
  return list;
}

json quantiles_json(const latency_quantiles& q) {
  return {{"p50", q.p50_us}, {"p90", q.p90_us}, {"p99", q.p99_us}};
}

} // namespace

std::string pools_body(const std::vector<pool_status>& pools) {
  return dump_json(json{{"v", 1}, {"pools", pools_json(pools)}});
}

std::string_view castellan_version() {
  return CASTELLAN_VERSION;
}

std::string status_body(const server_status& server, const std::vector<pool_status>& pools,
                        const telemetry_summary& sum) {
  json by_class = json::object();
  for (const auto& [cls, n] : sum.execs_by_class)
    by_class[cls] = n;
  json summary = {
      {"execs",
       {{"total", sum.execs}, {"by_class", std::move(by_class)}, {"per_second", sum.execs_per_second}}},
      {"latency_us", {{"run", quantiles_json(sum.run)}, {"queue", quantiles_json(sum.queue)}}},
      {"workers",
       {{"spawned", sum.workers_spawned},
        {"killed", sum.workers_killed},
        {"recycled", sum.workers_recycled}}},
      {"syscalls",
       {{"mediated", sum.syscalls_mediated},
        {"per_second", sum.syscalls_per_second},
        {"latency_us", quantiles_json(sum.syscall_latency)}}},
      {"audit", {{"records", sum.audit_records}, {"dropped", sum.audit_dropped}}}};
  return dump_json(json{{"v", 1},
                        {"version", castellan_version()},
                        {"draining", server.draining},
                        {"uptime_ms", server.uptime_ms},
                        {"in_flight", server.in_flight},
                        {"connections", server.connections},
                        {"pools", pools_json(pools)},
                        {"summary", std::move(summary)}});
}

std::string cancel_body(const cancel_reply& reply, std::string_view id) {
  const bool cancelled = reply.outcome == cancel_outcome::cancelled_running ||
                         reply.outcome == cancel_outcome::cancelled_queued;
  json j = {{"v", 1},
            {"exec_id", reply.exec_id},
            {"cancelled", cancelled},
            {"outcome", to_string(reply.outcome)}};
  if (!id.empty())
    j["id"] = id;
  return dump_json(j);
}

} // namespace castellan::api
