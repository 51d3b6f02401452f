#include "actors/exec_json.hpp"

#include <type_traits>

#include "actors/json_bytes.hpp"

namespace castellan {

nlohmann::json to_json(const policy_event& e) {
  return {{"kind", to_string(e.kind)},         {"syscall", e.syscall}, {"target", e.target},
          {"decision", to_string(e.decision)}, {"rule", e.rule},       {"pid", e.pid},
          {"timestamp_ns", e.timestamp_ns}};
}

namespace {

/// Output as a JSON string: as it is when it is UTF-8, else base64. Output
/// cut by its limit in the middle of a character is still text: the
/// character's first bytes are left out.
nlohmann::json output(const std::string& bytes, bool truncated, bool& base64) {
  std::string_view text = bytes;
  if (truncated)
    text.remove_suffix(incomplete_utf8_tail(text));
  base64 = !is_utf8(text);
  return base64 ? base64_encode(bytes) : std::string(text);
}

} // namespace

nlohmann::json to_json(const exec_result& r) {
  bool stdout_base64 = false;
  bool stderr_base64 = false;
  nlohmann::json out = output(r.stdout_data, r.stdout_truncated, stdout_base64);
  nlohmann::json err = output(r.stderr_data, r.stderr_truncated, stderr_base64);
  nlohmann::json events = nlohmann::json::array();
  for (const auto& e : r.events)
    events.push_back(to_json(e));
  nlohmann::json exception = nullptr;
  if (r.has_exception)
    exception = {{"type", r.exception.type},
                 {"message", r.exception.message},
                 {"traceback", r.exception.traceback}};
  nlohmann::json enforcement = nullptr;
  if (!r.enforcement.empty()) {
    enforcement = nlohmann::json::parse(r.enforcement, nullptr, false);
    if (enforcement.is_discarded())
      enforcement = r.enforcement; // not ours to drop: show it as text
  }
  nlohmann::json j = {
    {"exec_id", r.exec_id},
    {"exit_code", r.exit_code},
    {"error_class", to_string(r.error)},
    {"stdout", std::move(out)},
    {"stderr", std::move(err)},
    {"stdout_base64", stdout_base64},
    {"stderr_base64", stderr_base64},
    {"stdout_truncated", r.stdout_truncated},
    {"stderr_truncated", r.stderr_truncated},
    {"exception", exception},
    {"events", events},
    {"timing", {{"queue_us", r.timing.queue_us}, {"run_us", r.timing.run_us}}},
    {"usage", {{"cpu_us", r.usage.cpu_us}, {"peak_memory_bytes", r.usage.peak_memory_bytes}}},
    {"worker_id", r.worker_id},
    {"detail", r.detail},
    {"enforcement", enforcement},
  };
  if (!r.files.empty()) {
    nlohmann::json files = nlohmann::json::array();
    for (const auto& f : r.files) {
      nlohmann::json e = {{"path", f.path}, {"size", f.size}};
      if (!f.error.empty()) {
        e["error"] = f.error;
        e["message"] = f.message;
      } else if (compact_as_text(f.content)) {
        // Text only when escaping at most doubles it: the exec chooses the
        // bytes, up to 32 MiB of them, and control characters would each
        // take six bytes of the answer.
        e["content"] = f.content;
      } else {
        e["content_base64"] = base64_encode(f.content);
      }
      files.push_back(std::move(e));
    }
    j["files"] = std::move(files);
  }
  return j;
}

namespace {

/// Reads the members of one JSON object, remembering the first problem.
class member_reader {
public:
  member_reader(const nlohmann::json& j, std::string where) : j_(j), where_(std::move(where)) {
    if (!j.is_object())
      fail("", "is not an object");
  }

  template <class T>
  void number(const char* key, T& out) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    if (!v->is_number_integer() || (std::is_unsigned<T>::value && !v->is_number_unsigned()))
      return fail(key, "is not an integer of its kind");
    out = v->get<T>();
  }

  void boolean(const char* key, bool& out) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    if (!v->is_boolean())
      return fail(key, "is not true or false");
    out = v->get<bool>();
  }

  void text(const char* key, std::string& out) {
    const auto* v = find(key);
    if (v == nullptr)
      return;
    if (!v->is_string())
      return fail(key, "is not a string");
    out = v->get<std::string>();
  }

  /// Output: a string, base64 when `<key>_base64` says so.
  void bytes(const char* key, std::string& out) {
    bool base64 = false;
    boolean((std::string(key) + "_base64").c_str(), base64);
    text(key, out);
    if (base64 && problem_.empty()) {
      auto decoded = base64_decode(out);
      if (!decoded)
        return fail(key, "is flagged base64 and is not");
      out = std::move(*decoded);
    }
  }

  const nlohmann::json* find(const char* key) {
    if (!problem_.empty())
      return nullptr;
    auto it = j_.find(key);
    if (it == j_.end()) {
      fail(key, "is missing");
      return nullptr;
    }
    return &*it;
  }

  void fail(const std::string& key, const std::string& what) {
    if (problem_.empty())
      problem_ = where_ + (key.empty() ? "" : "." + key) + " " + what;
  }

  const std::string& problem() const { return problem_; }

private:
  const nlohmann::json& j_;
  std::string where_;
  std::string problem_;
};

} // namespace

outcome<exec_result> result_from_json(const nlohmann::json& j) {
  exec_result r;
  member_reader m(j, "result");
  m.number("exec_id", r.exec_id);
  m.number("exit_code", r.exit_code);
  std::string error;
  m.text("error_class", error);
  if (m.problem().empty() && !from_string(error, r.error))
    m.fail("error_class", "'" + error + "' is not an error class");
  m.bytes("stdout", r.stdout_data);
  m.bytes("stderr", r.stderr_data);
  m.boolean("stdout_truncated", r.stdout_truncated);
  m.boolean("stderr_truncated", r.stderr_truncated);
  if (const auto* ex = m.find("exception"); ex != nullptr && !ex->is_null()) {
    member_reader e(*ex, "result.exception");
    e.text("type", r.exception.type);
    e.text("message", r.exception.message);
    e.text("traceback", r.exception.traceback);
    if (!e.problem().empty())
      return logic_failure(e.problem());
    r.has_exception = true;
  }
  if (const auto* events = m.find("events"); events != nullptr) {
    if (!events->is_array())
      m.fail("events", "is not an array");
    else
      for (std::size_t i = 0; i < events->size(); ++i) {
        member_reader e((*events)[i], "result.events[" + std::to_string(i) + "]");
        policy_event pe;
        std::string kind, decision;
        e.text("kind", kind);
        e.text("syscall", pe.syscall);
        e.text("target", pe.target);
        e.text("decision", decision);
        e.text("rule", pe.rule);
        e.number("pid", pe.pid);
        e.number("timestamp_ns", pe.timestamp_ns);
        if (e.problem().empty() && !from_string(kind, pe.kind))
          e.fail("kind", "'" + kind + "' is not an event kind");
        if (e.problem().empty() && !from_string(decision, pe.decision))
          e.fail("decision", "'" + decision + "' is not a decision");
        if (!e.problem().empty())
          return logic_failure(e.problem());
        r.events.push_back(std::move(pe));
      }
  }
  if (const auto* timing = m.find("timing"); timing != nullptr) {
    member_reader t(*timing, "result.timing");
    t.number("queue_us", r.timing.queue_us);
    t.number("run_us", r.timing.run_us);
    if (!t.problem().empty())
      return logic_failure(t.problem());
  }
  if (const auto* usage = m.find("usage"); usage != nullptr) {
    member_reader u(*usage, "result.usage");
    u.number("cpu_us", r.usage.cpu_us);
    u.number("peak_memory_bytes", r.usage.peak_memory_bytes);
    if (!u.problem().empty())
      return logic_failure(u.problem());
  }
  m.number("worker_id", r.worker_id);
  m.text("detail", r.detail);
  if (const auto* enforcement = m.find("enforcement"); enforcement != nullptr) {
    // As to_json wrote it: the report's object, its text, or null.
    if (enforcement->is_string())
      r.enforcement = enforcement->get<std::string>();
    else if (!enforcement->is_null())
      r.enforcement = enforcement->dump();
  }
  if (!m.problem().empty())
    return logic_failure(m.problem());
  // Only when the request asked for files.
  if (auto files = j.find("files"); files != j.end()) {
    if (!files->is_array())
      return logic_failure("result.files is not an array");
    for (std::size_t i = 0; i < files->size(); ++i) {
      const auto& fj = (*files)[i];
      member_reader e(fj, "result.files[" + std::to_string(i) + "]");
      exec_file_out f;
      e.text("path", f.path);
      e.number("size", f.size);
      if (e.problem().empty() && fj.contains("error")) {
        e.text("error", f.error);
        e.text("message", f.message);
      } else if (e.problem().empty() && fj.contains("content_base64")) {
        std::string text;
        e.text("content_base64", text);
        auto decoded = base64_decode(text);
        if (e.problem().empty() && !decoded)
          e.fail("content_base64", "is not base64");
        else if (decoded)
          f.content = std::move(*decoded);
      } else {
        e.text("content", f.content);
      }
      if (!e.problem().empty())
        return logic_failure(e.problem());
      r.files.push_back(std::move(f));
    }
  }
  return r;
}

std::string dump_json(const nlohmann::json& j, int indent) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}

} // namespace castellan
