#include "actors/audit/audit_record.hpp"

#include <nlohmann/json.hpp>

#include "actors/audit/rfc3339.hpp"

namespace castellan {

namespace {

using json = nlohmann::ordered_json;

// Cuts a sandbox-provided string; the marker keeps the cut visible.
std::string bounded(const std::string& s) {
  if (s.size() <= audit_max_field_bytes)
    return s;
  return s.substr(0, audit_max_field_bytes) + "...[" +
         std::to_string(s.size() - audit_max_field_bytes) + " bytes truncated]";
}

json bounded_list(const std::vector<std::string>& xs) {
  json out = json::array();
  const size_t n = std::min(xs.size(), audit_max_list_entries);
  for (size_t i = 0; i < n; ++i)
    out.push_back(bounded(xs[i]));
  if (xs.size() > n)
    out.push_back("...[" + std::to_string(xs.size() - n) + " entries truncated]");
  return out;
}

// The common head, in the schema's field order: v, ts, kind, seq.
json head(audit_kind kind, int64_t ts_ns, uint64_t seq) {
  json j;
  j["v"] = audit_schema_version;
  j["ts"] = format_rfc3339(ts_ns);
  j["kind"] = std::string{kind_name(kind)};
  j["seq"] = seq;
  return j;
}

void exec_fields(json& j, uint64_t exec_id, const std::string& pool, uint64_t worker_id,
                 const std::string& policy) {
  j["exec_id"] = exec_id;
  j["pool"] = pool;
  j["worker_id"] = worker_id;
  j["policy"] = policy;
}

audit_record finish(json&& j, audit_kind kind, int64_t ts_ns, uint64_t seq, uint64_t exec_id,
                    const std::string& pool) {
  audit_record rec;
  rec.kind = kind;
  rec.timestamp_ns = ts_ns;
  rec.seq = seq;
  rec.exec_id = exec_id;
  rec.pool = pool;
  // Sandbox-provided strings need not be UTF-8: replace invalid bytes with
  // U+FFFD instead of throwing (the default), so every event is recorded.
  rec.json = j.dump(-1, ' ', false, json::error_handler_t::replace);
  return rec;
}

int64_t stamp(int64_t ts_ns, int64_t now_ns) {
  return ts_ns != 0 ? ts_ns : now_ns;
}

} // namespace

audit_kind kind_of(const exec_started&) {
  return audit_kind::exec_start;
}

audit_kind kind_of(const exec_finished& x) {
  switch (x.error) {
  case error_class::timeout:
    return audit_kind::timeout;
  case error_class::oom:
    return audit_kind::oom;
  case error_class::worker_lost:
    return audit_kind::worker_lost;
  default:
    return audit_kind::exec_end;
  }
}

audit_kind kind_of(const security_event& x) {
  return security_kind(x.event.kind);
}

audit_kind kind_of(const worker_lost_event&) {
  return audit_kind::worker_lost;
}

audit_kind kind_of(const policy_rejection&) {
  return audit_kind::policy_rejected;
}

audit_kind kind_of(const connection_record&) {
  return audit_kind::connection;
}

audit_kind kind_of(const session_record&) {
  return audit_kind::session;
}

std::string_view syscall_of(const security_event& x) {
  return x.event.syscall;
}

std::string_view syscall_of(const connection_record&) {
  return "connect";
}

audit_record encode(const exec_started& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  exec_fields(j, x.exec_id, x.pool, x.worker_id, x.policy);
  j["policy_revision"] = x.policy_revision;
  if (x.argv.empty()) {
    j["mode"] = "code";
    j["code_sha256"] = x.code_sha256;
    j["code_size"] = x.code_size;
  } else {
    j["mode"] = "command";
    j["argv"] = bounded_list(x.argv);
  }
  if (x.origin.peer.empty() && x.origin.token.empty())
    j["origin"] = nullptr;
  else
    j["origin"] = {{"peer", bounded(x.origin.peer)},
                   {"token", x.origin.token.empty() ? json(nullptr) : json(bounded(x.origin.token))}};
  j["env_names"] = bounded_list(x.env_names);
  j["cwd"] = bounded(x.cwd);
  j["stdin_size"] = x.stdin_size;
  return finish(std::move(j), kind_of(x), ts, seq, x.exec_id, x.pool);
}

audit_record encode(const exec_finished& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  exec_fields(j, x.exec_id, x.pool, x.worker_id, x.policy);
  j["policy_revision"] = x.policy_revision;
  j["error"] = to_string(x.error);
  j["exit_code"] = x.exit_code;
  j["queue_us"] = x.timing.queue_us;
  j["run_us"] = x.timing.run_us;
  j["cpu_us"] = x.usage.cpu_us;
  j["peak_memory_bytes"] = x.usage.peak_memory_bytes;
  j["detail"] = bounded(x.detail);
  return finish(std::move(j), kind_of(x), ts, seq, x.exec_id, x.pool);
}

audit_record encode(const security_event& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.event.timestamp_ns, now_ns);
  const auto kind = kind_of(x);
  auto j = head(kind, ts, seq);
  exec_fields(j, x.exec_id, x.pool, x.worker_id, x.policy);
  if (kind == audit_kind::policy_event)
    // A kind from a newer node: its number, since no name is known here.
    j["event_kind"] = std::to_string(static_cast<unsigned>(x.event.kind));
  j["syscall"] = bounded(x.event.syscall);
  j["target"] = bounded(x.event.target);
  j["decision"] = to_string(x.event.decision);
  j["rule"] = bounded(x.event.rule);
  j["pid"] = x.event.pid;
  return finish(std::move(j), kind, ts, seq, x.exec_id, x.pool);
}

audit_record encode(const worker_lost_event& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  j["exec_id"] = x.exec_id;
  j["pool"] = x.pool;
  j["worker_id"] = x.worker_id;
  j["pid"] = x.pid;
  j["reason"] = bounded(x.reason);
  return finish(std::move(j), kind_of(x), ts, seq, x.exec_id, x.pool);
}

audit_record encode(const policy_rejection& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  j["policy"] = bounded(x.policy_name);
  j["path"] = bounded(x.path);
  j["errors"] = bounded_list(x.errors);
  return finish(std::move(j), kind_of(x), ts, seq, 0, std::string{});
}

audit_record encode(const connection_record& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  j["exec_id"] = x.exec_id;
  j["pool"] = x.pool;
  j["worker_id"] = x.worker_id;
  j["host"] = bounded(x.host);
  j["address"] = bounded(x.address);
  j["port"] = x.port;
  j["decision"] = bounded(x.decision);
  j["rule"] = bounded(x.rule);
  j["bytes_out"] = x.bytes_out;
  j["bytes_in"] = x.bytes_in;
  j["duration_us"] = x.duration_us;
  j["method"] = bounded(x.method);
  j["reason"] = bounded(x.reason);
  return finish(std::move(j), kind_of(x), ts, seq, x.exec_id, x.pool);
}

audit_record encode(const session_record& x, uint64_t seq, int64_t now_ns) {
  const auto ts = stamp(x.timestamp_ns, now_ns);
  auto j = head(kind_of(x), ts, seq);
  j["session"] = bounded(x.session_id);
  j["owner"] = bounded(x.owner);
  j["pool"] = bounded(x.pool);
  j["event"] = bounded(x.event);
  j["reason"] = bounded(x.reason);
  j["worker_pid"] = x.worker_pid;
  j["execs"] = x.execs;
  return finish(std::move(j), kind_of(x), ts, seq, 0, x.session_id);
}

audit_record encode_drop_report(std::string_view sink, uint64_t dropped, uint64_t dropped_total,
                                uint64_t seq, int64_t now_ns) {
  auto j = head(audit_kind::drop_report, now_ns, seq);
  j["sink"] = std::string{sink};
  j["dropped"] = dropped;
  j["dropped_total"] = dropped_total;
  return finish(std::move(j), audit_kind::drop_report, now_ns, seq, 0, std::string{});
}

audit_entry to_entry(const audit_record& rec) {
  return audit_entry{
      rec.seq, std::string{kind_name(rec.kind)}, rec.timestamp_ns, rec.exec_id, rec.pool, rec.json};
}

bool matches(const audit_filter& filter, const audit_record& rec) {
  if (!filter.kinds.empty() && filter.kinds.count(std::string{kind_name(rec.kind)}) == 0)
    return false;
  if (filter.exec_id != 0 && filter.exec_id != rec.exec_id)
    return false;
  return filter.pool.empty() || filter.pool == rec.pool;
}

} // namespace castellan
