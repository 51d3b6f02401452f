#include "actors/telemetry/telemetry_core.hpp"

#include <algorithm>
#include <cstdio>

#include "actors/telemetry/prometheus_exposition.hpp"

namespace castellan {

namespace mn = metric_names;

namespace {

std::string human_us(uint64_t us) {
  char buf[32];
  if (us < 1000)
    std::snprintf(buf, sizeof(buf), "%lluus", static_cast<unsigned long long>(us));
  else if (us < 1000000)
    std::snprintf(buf, sizeof(buf), "%.1fms", static_cast<double>(us) / 1e3);
  else
    std::snprintf(buf, sizeof(buf), "%.1fs", static_cast<double>(us) / 1e6);
  return buf;
}

std::string human_num(double v) {
  char buf[32];
  if (v == static_cast<double>(static_cast<uint64_t>(v)))
    std::snprintf(buf, sizeof(buf), "%llu", static_cast<unsigned long long>(v));
  else
    std::snprintf(buf, sizeof(buf), "%.1f", v);
  return buf;
}

// All series of a histogram family merged (e.g. latency over every pool).
histogram merged(const metrics_registry& reg, const char* name) {
  histogram h;
  if (const auto* f = reg.find(name))
    for (const auto& [labels, s] : f->histograms)
      h.merge(s);
  return h;
}

double total(const metrics_registry& reg, const char* name) {
  double sum = 0;
  if (const auto* f = reg.find(name))
    for (const auto& [labels, v] : f->values)
      sum += v;
  return sum;
}

latency_quantiles quantiles_of(const histogram& h) {
  return {h.quantile_us(0.5), h.quantile_us(0.9), h.quantile_us(0.99)};
}

std::string quantiles(const latency_quantiles& q) {
  return "p50 " + human_us(q.p50_us) + " p90 " + human_us(q.p90_us) + " p99 " + human_us(q.p99_us);
}

uint64_t ns_to_us_ceil(uint64_t ns) {
  return ns / 1000 + (ns % 1000 != 0 ? 1 : 0);
}

} // namespace

telemetry_core::telemetry_core(size_t max_series_per_family) : reg_(max_series_per_family) {
  struct decl {
    const char* name;
    metric_type type;
    const char* help;
  };
  const decl catalogue[] = {
      {mn::execs, metric_type::counter, "Finished execs by pool and error class."},
      {mn::exec_duration, metric_type::histogram,
       "Exec run time, from dispatch to a worker to the result."},
      {mn::exec_queue_wait, metric_type::histogram,
       "Exec queue wait, from arrival at the pool to dispatch."},
      {mn::pool_size, metric_type::gauge, "Workers alive in the pool, in any state."},
      {mn::pool_workers, metric_type::gauge,
       "Workers of the pool by state (idle, busy, starting)."},
      {mn::pool_queue_length, metric_type::gauge, "Execs waiting in the pool's queue."},
      {mn::pool_queue_limit, metric_type::gauge, "The pool's queue bound (busy beyond it)."},
      {mn::worker_spawns, metric_type::counter, "Workers spawned."},
      {mn::worker_kills, metric_type::counter,
       "Workers killed (deadline, cancel, policy, limits)."},
      {mn::worker_recycles, metric_type::counter, "Workers retired after use and replaced."},
      {mn::worker_memory, metric_type::gauge, "A worker's current cgroup memory usage."},
      {mn::worker_cpu, metric_type::counter, "A worker's cumulative cgroup CPU time."},
      {mn::mediated_syscalls, metric_type::counter,
       "Syscalls decided through seccomp user notification, by decision."},
      {mn::mediated_latency, metric_type::histogram,
       "Time from a seccomp notification to its response."},
      {mn::ring_fill, metric_type::gauge,
       "Last observed fill of the shared-memory rings (0 to 1)."},
      {mn::ring_fill_max, metric_type::gauge, "Highest observed fill of the shared-memory rings."},
      {mn::audit_records, metric_type::counter, "Audit records written, by kind."},
      {mn::audit_dropped, metric_type::counter,
       "Audit records a sink could not take (slow subscriber, stalled disk), by sink."},
      {mn::request_policy_execs, metric_type::counter,
       "Execs that came with a request policy, by route (same, narrowed, policy_pool)."},
      {mn::policy_pools_started, metric_type::counter, "Pools started for request policies."},
      {mn::policy_pools_stopped, metric_type::counter,
       "Pools of request policies stopped, by reason (idle, lru)."},
  };
  for (const auto& d : catalogue)
    reg_.declare(d.name, d.type, d.help);
}

void telemetry_core::apply(const exec_observation& x, int64_t now_ms) {
  reg_.add(mn::execs, {{"pool", x.pool}, {"error_class", to_string(x.error)}}, 1);
  // A busy refusal never ran and never waited: keep it out of the latencies.
  if (x.error != error_class::busy) {
    reg_.observe_us(mn::exec_duration, {{"pool", x.pool}}, x.run_us);
    reg_.observe_us(mn::exec_queue_wait, {{"pool", x.pool}}, x.queue_us);
  }
  execs_rate_.add(1, now_ms);
}

void telemetry_core::apply(const pool_status& x) {
  reg_.set(mn::pool_size, {{"pool", x.name}}, x.size);
  reg_.set(mn::pool_workers, {{"pool", x.name}, {"state", "idle"}}, x.idle);
  reg_.set(mn::pool_workers, {{"pool", x.name}, {"state", "busy"}}, x.busy);
  reg_.set(mn::pool_workers, {{"pool", x.name}, {"state", "starting"}}, x.starting);
  reg_.set(mn::pool_queue_length, {{"pool", x.name}}, x.queued);
  reg_.set(mn::pool_queue_limit, {{"pool", x.name}}, x.queue_limit);
}

void telemetry_core::apply(const worker_usage& x) {
  const metric_labels labels{{"pool", x.pool}, {"worker", std::to_string(x.worker_id)}};
  reg_.set(mn::worker_memory, labels, static_cast<double>(x.memory_bytes));
  reg_.set(mn::worker_cpu, labels, static_cast<double>(x.cpu_us) / 1e6);
}

void telemetry_core::apply(const worker_retired& x) {
  const auto id = std::to_string(x.worker_id);
  auto same = [&](const metric_labels& l) {
    auto p = l.find("pool");
    auto w = l.find("worker");
    return p != l.end() && w != l.end() && p->second == x.pool && w->second == id;
  };
  reg_.remove_if(mn::worker_memory, same);
  reg_.remove_if(mn::worker_cpu, same);
}

bool telemetry_core::apply(const counter_increment& x) {
  // An invalid name stays undeclared; `add` then refuses it and counts that.
  if (reg_.find(x.name) == nullptr)
    reg_.declare(x.name, metric_type::counter, "castellan counter " + x.name + ".");
  return reg_.add(x.name, metric_labels(x.labels.begin(), x.labels.end()),
                  static_cast<double>(x.value));
}

void telemetry_core::apply(const mediated_syscall& x, int64_t now_ms) {
  reg_.add(mn::mediated_syscalls, {{"pool", x.pool}, {"decision", x.decision}}, 1);
  reg_.observe_us(mn::mediated_latency, {{"pool", x.pool}}, ns_to_us_ceil(x.latency_ns));
  syscalls_rate_.add(1, now_ms);
}

void telemetry_core::apply(const ring_fill& x) {
  if (x.capacity_bytes == 0)
    return;
  const double ratio =
      std::min(1.0, static_cast<double>(x.used_bytes) / static_cast<double>(x.capacity_bytes));
  const metric_labels labels{{"pool", x.pool}, {"ring", x.ring}};
  reg_.set(mn::ring_fill, labels, ratio);
  const auto prev = reg_.value(mn::ring_fill_max, labels);
  if (!prev || *prev < ratio)
    reg_.set(mn::ring_fill_max, labels, ratio);
}

std::string telemetry_core::exposition() const {
  return to_prometheus_text(reg_);
}

telemetry_summary telemetry_core::summarize(int64_t now_ms) const {
  telemetry_summary out;
  if (const auto* f = reg_.find(mn::execs))
    for (const auto& [labels, v] : f->values) {
      auto cls = labels.find("error_class");
      out.execs_by_class[cls == labels.end() ? "other" : cls->second] += static_cast<uint64_t>(v);
      out.execs += static_cast<uint64_t>(v);
    }
  out.execs_per_second = execs_rate_.per_second(now_ms);
  out.run = quantiles_of(merged(reg_, mn::exec_duration));
  out.queue = quantiles_of(merged(reg_, mn::exec_queue_wait));
  out.workers_spawned = static_cast<uint64_t>(total(reg_, mn::worker_spawns));
  out.workers_killed = static_cast<uint64_t>(total(reg_, mn::worker_kills));
  out.workers_recycled = static_cast<uint64_t>(total(reg_, mn::worker_recycles));
  out.syscalls_mediated = static_cast<uint64_t>(total(reg_, mn::mediated_syscalls));
  out.syscalls_per_second = syscalls_rate_.per_second(now_ms);
  out.syscall_latency = quantiles_of(merged(reg_, mn::mediated_latency));
  out.audit_records = static_cast<uint64_t>(total(reg_, mn::audit_records));
  out.audit_dropped = static_cast<uint64_t>(total(reg_, mn::audit_dropped));
  return out;
}

std::string telemetry_core::summary(int64_t now_ms) const {
  const telemetry_summary sum = summarize(now_ms);
  std::string out;
  std::string classes;
  for (const auto& [cls, v] : sum.execs_by_class)
    classes += (classes.empty() ? "" : ", ") + cls + " " + human_num(static_cast<double>(v));
  char rate[32];
  std::snprintf(rate, sizeof(rate), "%.1f/s", sum.execs_per_second);
  out += "execs     " + human_num(static_cast<double>(sum.execs)) +
         (classes.empty() ? "" : " (" + classes + ")") + ", " + rate + "\n";
  out += "latency   run " + quantiles(sum.run) + "; queue " + quantiles(sum.queue) + "\n";
  // pools: one line each
  if (const auto* f = reg_.find(mn::pool_size)) {
    for (const auto& [labels, size] : f->values) {
      auto p = labels.find("pool");
      const std::string pool = p == labels.end() ? "" : p->second;
      auto get = [&](const char* name, metric_labels l) {
        return human_num(reg_.value(name, l).value_or(0));
      };
      out += "pool      " + pool + ": " + human_num(size) + " workers (" +
             get(mn::pool_workers, {{"pool", pool}, {"state", "idle"}}) + " idle, " +
             get(mn::pool_workers, {{"pool", pool}, {"state", "busy"}}) + " busy, " +
             get(mn::pool_workers, {{"pool", pool}, {"state", "starting"}}) + " starting), queue " +
             get(mn::pool_queue_length, {{"pool", pool}}) + "/" +
             get(mn::pool_queue_limit, {{"pool", pool}}) + "\n";
    }
  }
  out += "workers   spawned " + human_num(static_cast<double>(sum.workers_spawned)) + ", killed " +
         human_num(static_cast<double>(sum.workers_killed)) + ", recycled " +
         human_num(static_cast<double>(sum.workers_recycled)) + "\n";
  std::snprintf(rate, sizeof(rate), "%.1f/s", sum.syscalls_per_second);
  out += "syscalls  mediated " + human_num(static_cast<double>(sum.syscalls_mediated)) + ", " +
         rate + ", latency " + quantiles(sum.syscall_latency) + "\n";
  out += "audit     records " + human_num(static_cast<double>(sum.audit_records)) + ", dropped " +
         human_num(static_cast<double>(sum.audit_dropped)) + "\n";
  return out;
}

} // namespace castellan
