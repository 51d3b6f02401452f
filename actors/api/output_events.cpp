#include "actors/api/output_events.hpp"

#include <nlohmann/json.hpp>

#include "actors/exec_json.hpp"
#include "actors/json_bytes.hpp"

namespace castellan::api {

std::string sse_event(std::string_view name, std::string_view data) {
  std::string out;
  out.reserve(name.size() + data.size() + 16);
  out += "event: ";
  out += name;
  out += "\ndata: ";
  out += data;
  out += "\n\n";
  return out;
}

std::string output_events::event_for(bool is_stderr, channel& c, std::string data) {
  std::string text = c.held + data;
  c.held.clear();
  const std::size_t cut = incomplete_utf8_tail(text);
  c.held = text.substr(text.size() - cut);
  text.resize(text.size() - cut);
  if (text.empty())
    return {};
  c.sent += text.size();
  const bool base64 = !is_utf8(text);
  nlohmann::json j = {{"data", base64 ? base64_encode(text) : text}, {"base64", base64}};
  return sse_event(is_stderr ? "stderr" : "stdout", dump_json(j));
}

std::string output_events::piece(const exec_output& o) {
  started_ = true;
  return event_for(o.is_stderr, o.is_stderr ? err_ : out_, o.data);
}

std::string output_events::finish(const exec_result& r, std::string_view result_json) {
  std::string out;
  for (bool is_stderr : {false, true}) {
    channel& c = is_stderr ? err_ : out_;
    const std::string& all = is_stderr ? r.stderr_data : r.stdout_data;
    // The held bytes are part of what was not sent yet.
    c.held.clear();
    if (all.size() > c.sent) {
      std::string rest = all.substr(c.sent);
      // The whole remainder now, cut character or not: nothing follows.
      c.sent = all.size();
      const bool base64 = !is_utf8(rest);
      nlohmann::json j = {{"data", base64 ? base64_encode(rest) : rest}, {"base64", base64}};
      out += sse_event(is_stderr ? "stderr" : "stdout", dump_json(j));
    }
  }
  out += sse_event("result", result_json);
  return out;
}

} // namespace castellan::api
