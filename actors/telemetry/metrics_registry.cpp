#include "actors/telemetry/metrics_registry.hpp"

#include <cmath>

namespace castellan {

namespace {

constexpr const char* refused_name = "castellan_telemetry_refused_total";

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool name_char(char c, bool first, bool colon) {
  const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  const bool digit = c >= '0' && c <= '9';
  return alpha || (colon && c == ':') || (!first && digit);
}

} // namespace

std::string_view type_name(metric_type x) {
  switch (x) {
  case metric_type::counter:
    return "counter";
  case metric_type::gauge:
    return "gauge";
  case metric_type::histogram:
    return "histogram";
  }
  return "untyped";
}

bool valid_metric_name(std::string_view name) {
  if (name.empty())
    return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, true))
      return false;
  return true;
}

bool valid_label_name(std::string_view name) {
  if (name.empty() || name.substr(0, 2) == "__")
    return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!name_char(name[i], i == 0, false))
      return false;
  return true;
}

metrics_registry::metrics_registry(size_t max_series_per_family)
    : max_series_(max_series_per_family) {
  auto& f = families_[refused_name];
  f.name = refused_name;
  f.type = metric_type::counter;
  f.help = "Metric updates refused (unknown metric, wrong type, invalid label, series cap).";
  f.values[{}] = 0;
}

outcome<void> metrics_registry::declare(const std::string& name, metric_type type,
                                        std::string help) {
  if (!valid_metric_name(name))
    return logic_failure("invalid metric name '" + name + "'");
  if (type == metric_type::counter && !ends_with(name, "_total"))
    return logic_failure("counter '" + name + "' must end in _total");
  if (type != metric_type::counter && ends_with(name, "_total"))
    return logic_failure("only counters end in _total: '" + name + "'");
  if (type == metric_type::histogram && !ends_with(name, "_seconds"))
    return logic_failure("histogram '" + name + "' must end in _seconds");
  auto i = families_.find(name);
  if (i != families_.end()) {
    if (i->second.type != type)
      return logic_failure("metric '" + name + "' already declared as " +
                           std::string{type_name(i->second.type)});
    return {};
  }
  auto& f = families_[name];
  f.name = name;
  f.type = type;
  f.help = std::move(help);
  return {};
}

void metrics_registry::refuse() {
  ++refused_;
  families_[refused_name].values[{}] = static_cast<double>(refused_);
}

metric_family* metrics_registry::family_for(const std::string& name, metric_type type,
                                            const metric_labels& labels, bool creates_series) {
  auto i = families_.find(name);
  if (i == families_.end() || i->second.type != type) {
    // `set` on a counter is allowed: some totals are kept elsewhere.
    if (!(i != families_.end() && type == metric_type::gauge &&
          i->second.type == metric_type::counter))
      return nullptr;
  }
  for (const auto& [k, v] : labels) {
    (void)v;
    if (!valid_label_name(k) || (i->second.type == metric_type::histogram && k == "le"))
      return nullptr;
  }
  if (creates_series && i->second.series() >= max_series_)
    return nullptr;
  return &i->second;
}

bool metrics_registry::add(const std::string& name, const metric_labels& labels, double delta) {
  if (!(delta >= 0) || !std::isfinite(delta)) {
    refuse();
    return false;
  }
  auto i = families_.find(name);
  const bool exists = i != families_.end() && i->second.values.count(labels) > 0;
  auto* f = family_for(name, metric_type::counter, labels, !exists);
  if (f == nullptr) {
    refuse();
    return false;
  }
  f->values[labels] += delta;
  return true;
}

bool metrics_registry::set(const std::string& name, const metric_labels& labels, double value) {
  auto i = families_.find(name);
  const bool exists = i != families_.end() && i->second.values.count(labels) > 0;
  auto* f = family_for(name, metric_type::gauge, labels, !exists);
  if (f == nullptr || (f->type == metric_type::counter && !(value >= 0))) {
    refuse();
    return false;
  }
  f->values[labels] = value;
  return true;
}

bool metrics_registry::observe_us(const std::string& name, const metric_labels& labels,
                                  uint64_t us) {
  auto i = families_.find(name);
  const bool exists = i != families_.end() && i->second.histograms.count(labels) > 0;
  auto* f = family_for(name, metric_type::histogram, labels, !exists);
  if (f == nullptr) {
    refuse();
    return false;
  }
  f->histograms[labels].observe(us);
  return true;
}

size_t metrics_registry::remove_if(const std::string& name,
                                   const std::function<bool(const metric_labels&)>& pred) {
  auto i = families_.find(name);
  if (i == families_.end())
    return 0;
  size_t removed = 0;
  auto& f = i->second;
  for (auto j = f.values.begin(); j != f.values.end();) {
    if (pred(j->first)) {
      j = f.values.erase(j);
      ++removed;
    } else {
      ++j;
    }
  }
  for (auto j = f.histograms.begin(); j != f.histograms.end();) {
    if (pred(j->first)) {
      j = f.histograms.erase(j);
      ++removed;
    } else {
      ++j;
    }
  }
  return removed;
}

std::optional<double> metrics_registry::value(const std::string& name,
                                              const metric_labels& labels) const {
  auto i = families_.find(name);
  if (i == families_.end())
    return std::nullopt;
  auto j = i->second.values.find(labels);
  if (j == i->second.values.end())
    return std::nullopt;
  return j->second;
}

const histogram* metrics_registry::find_histogram(const std::string& name,
                                                  const metric_labels& labels) const {
  auto i = families_.find(name);
  if (i == families_.end())
    return nullptr;
  auto j = i->second.histograms.find(labels);
  return j == i->second.histograms.end() ? nullptr : &j->second;
}

const metric_family* metrics_registry::find(const std::string& name) const {
  auto i = families_.find(name);
  return i == families_.end() ? nullptr : &i->second;
}

} // namespace castellan
