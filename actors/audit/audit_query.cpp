#include "actors/audit/audit_query.hpp"

#include <cstdio>

#include "actors/audit/rfc3339.hpp"

namespace castellan {

namespace {

using json = nlohmann::ordered_json;

std::string str(const json& rec, const char* key) {
  auto i = rec.find(key);
  if (i == rec.end())
    return {};
  if (i->is_string())
    return i->get<std::string>();
  return i->dump(-1, ' ', false, json::error_handler_t::replace);
}

uint64_t num(const json& rec, const char* key) {
  auto i = rec.find(key);
  if (i == rec.end() || !i->is_number_unsigned())
    return 0;
  return i->get<uint64_t>();
}

std::string micros(uint64_t us) {
  char buf[32];
  if (us < 1000)
    std::snprintf(buf, sizeof(buf), "%lluus", static_cast<unsigned long long>(us));
  else if (us < 1000000)
    std::snprintf(buf, sizeof(buf), "%.2fms", static_cast<double>(us) / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.2fs", static_cast<double>(us) / 1e6);
  return buf;
}

std::string bytes(uint64_t n) {
  char buf[32];
  if (n < 1024)
    std::snprintf(buf, sizeof(buf), "%lluB", static_cast<unsigned long long>(n));
  else if (n < 1024 * 1024)
    std::snprintf(buf, sizeof(buf), "%.1fKiB", static_cast<double>(n) / 1024.0);
  else
    std::snprintf(buf, sizeof(buf), "%.1fMiB", static_cast<double>(n) / (1024.0 * 1024.0));
  return buf;
}

std::string exec_prefix(const json& rec) {
  return "exec=" + str(rec, "exec_id") + " pool=" + str(rec, "pool") +
         " worker=" + str(rec, "worker_id");
}

} // namespace

outcome<json> parse_audit_line(std::string_view line) {
  auto j = json::parse(line.begin(), line.end(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    return logic_failure("not a JSON object");
  if (!j.contains("v") || !j.contains("kind") || !j["kind"].is_string() || !j.contains("ts") ||
      !j["ts"].is_string())
    return logic_failure("not an audit record (needs v, ts and kind)");
  return j;
}

bool parse_since(std::string_view text, int64_t now_ns, int64_t& out_ns) {
  if (parse_rfc3339(text, out_ns))
    return true;
  if (text.size() < 2)
    return false;
  int64_t unit_ns = 0;
  switch (text.back()) {
  case 's':
    unit_ns = 1'000'000'000;
    break;
  case 'm':
    unit_ns = 60'000'000'000;
    break;
  case 'h':
    unit_ns = 3'600'000'000'000;
    break;
  case 'd':
    unit_ns = 86'400'000'000'000;
    break;
  default:
    return false;
  }
  int64_t n = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9' || n > 1'000'000)
      return false;
    n = n * 10 + (text[i] - '0');
  }
  out_ns = now_ns - n * unit_ns;
  return true;
}

bool tail_matches(const tail_filter& filter, const json& rec) {
  if (!filter.kinds.empty() && filter.kinds.count(str(rec, "kind")) == 0)
    return false;
  if (filter.exec_id != 0 && num(rec, "exec_id") != filter.exec_id)
    return false;
  if (filter.since_ns != INT64_MIN) {
    int64_t ts = 0;
    if (!parse_rfc3339(str(rec, "ts"), ts) || ts < filter.since_ns)
      return false;
  }
  return true;
}

std::string pretty_audit_line(const json& rec) {
  const auto kind = str(rec, "kind");
  char head[96];
  std::snprintf(head, sizeof(head), "%-30s  %-20s  ", str(rec, "ts").c_str(), kind.c_str());
  std::string out = head;
  if (kind == "exec_start") {
    out += exec_prefix(rec) + " policy=" + str(rec, "policy");
    if (str(rec, "mode") == "command")
      out += " argv=" + str(rec, "argv");
    else
      out += " code=sha256:" + str(rec, "code_sha256").substr(0, 16) + " (" +
             bytes(num(rec, "code_size")) + ")";
  } else if (rec.contains("error")) { // exec_end, timeout, oom, worker_lost during an exec
    out += exec_prefix(rec) + " error=" + str(rec, "error") + " exit=" + str(rec, "exit_code") +
           " run=" + micros(num(rec, "run_us")) + " queue=" + micros(num(rec, "queue_us")) +
           " cpu=" + micros(num(rec, "cpu_us")) + " mem=" + bytes(num(rec, "peak_memory_bytes"));
    if (!str(rec, "detail").empty())
      out += " (" + str(rec, "detail") + ")";
  } else if (rec.contains("syscall")) { // syscall_denied, policy_warning, optimistic_violation
    out += exec_prefix(rec) + " " + str(rec, "syscall") + " " + str(rec, "target") + " -> " +
           str(rec, "decision") + " (rule " + str(rec, "rule") + ", pid " + str(rec, "pid") + ")";
  } else if (kind == "worker_lost") {
    out += "pool=" + str(rec, "pool") + " worker=" + str(rec, "worker_id") +
           " pid=" + str(rec, "pid") + " " + str(rec, "reason");
  } else if (kind == "policy_rejected") {
    out += "policy=" + str(rec, "policy") + " path=" + str(rec, "path");
    auto errs = rec.find("errors");
    if (errs != rec.end() && errs->is_array()) {
      out += " " + std::to_string(errs->size()) + " error(s):";
      for (const auto& e : *errs)
        out += " " + (e.is_string() ? e.get<std::string>() : e.dump()) + ";";
    }
  } else if (kind == "connection") {
    out += exec_prefix(rec) + " " + str(rec, "host") + ":" + str(rec, "port") + " (" +
           str(rec, "address") + ") -> " + str(rec, "decision") + " (rule " + str(rec, "rule") +
           ") out=" + bytes(num(rec, "bytes_out")) + " in=" + bytes(num(rec, "bytes_in")) + " " +
           micros(num(rec, "duration_us"));
  } else if (kind == "drop_report") {
    out += "sink=" + str(rec, "sink") + " dropped=" + str(rec, "dropped") + " (total " +
           str(rec, "dropped_total") + ")";
  } else {
    // A kind this build does not know (a newer writer): show every field.
    bool first = true;
    for (auto it = rec.begin(); it != rec.end(); ++it) {
      if (it.key() == "v" || it.key() == "ts" || it.key() == "kind" || it.key() == "seq")
        continue;
      out += (first ? "" : " ") + it.key() + "=" +
             (it->is_string() ? it->get<std::string>() : it->dump());
      first = false;
    }
  }
  return out;
}

} // namespace castellan
