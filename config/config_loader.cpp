#include "config/config_loader.hpp"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>

#include <toml++/toml.h>

#include "actors/api/tls_settings.hpp"
#include "actors/audit/audit_kind.hpp"
#include "actors/policy/engine/policy_directory.hpp"
#include "actors/policy/engine/policy_loader.hpp"
#include "actors/policy/engine/syscall_names.hpp"
#include "config/byte_size.hpp"
#include "config/listen_check.hpp"
#include "config/regular_file.hpp"
#include "config/tokens_loader.hpp"
#include "platform/install_layout.hpp"

namespace castellan::config {

namespace {

namespace fs = std::filesystem;

constexpr uint64_t kib = 1ull << 10;
constexpr uint64_t mib = 1ull << 20;
constexpr uint64_t gib = 1ull << 30;
constexpr uint64_t tib = 1ull << 40;

/// Dots one dotted key or table header may have (see too_deep_key).
constexpr std::size_t max_key_dots = 32;

// -- rendering -------------------------------------------------------------------

const char* type_name(const toml::node& n) {
  switch (n.type()) {
  case toml::node_type::table:
    return "a table";
  case toml::node_type::array:
    return "an array";
  case toml::node_type::string:
    return "a string";
  case toml::node_type::integer:
    return "an integer";
  case toml::node_type::floating_point:
    return "a float";
  case toml::node_type::boolean:
    return "a boolean";
  case toml::node_type::date:
    return "a date";
  case toml::node_type::time:
    return "a time";
  case toml::node_type::date_time:
    return "a date-time";
  default:
    return "nothing";
  }
}

/// The value as TOML on one line, shortened when long.
std::string render(const toml::node& n) {
  if (n.is_table())
    return "{…}";
  std::ostringstream out;
  out << toml::toml_formatter{n, toml::format_flags::none};
  std::string text = out.str();
  std::replace(text.begin(), text.end(), '\n', ' ');
  if (text.size() > 80)
    text = text.substr(0, 77) + "...";
  return text;
}

/// `"text"` with what a terminal should not see escaped.
std::string toml_quoted(std::string_view text) {
  toml::value<std::string> v{std::string{text}};
  return render(v);
}

/// A key as it appears in a key path: bare when TOML allows it, else quoted.
std::string key_text(std::string_view key) {
  const bool bare = !key.empty() && std::all_of(key.begin(), key.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
  return bare ? std::string{key} : toml_quoted(key);
}

std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? key_text(key) : path + "." + key_text(key);
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0u : 1u)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

/// The candidate closest to `word`, when close enough to be a typo.
std::optional<std::string> closest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = std::max<std::size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    const auto d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : ", ") + w;
  return out;
}

// -- the loader ------------------------------------------------------------------

/// Where in the file: a node's or a key's begin.
struct place {
  uint32_t line = 0;
  uint32_t column = 0;
};

place place_of(const toml::source_region& r) {
  return {r.begin.line, r.begin.column};
}

/// Where each pool's keys were, and which limits the file set, for the
/// checks that need the whole config (duplicates, policies, files).
struct pool_places {
  place table, name, policy, python, warm_start, isolation;
  std::map<std::string, place> limits; ///< limit key ("memory", "timeout_ms") → where it was set
};

class loader;

/// Reads the keys of one table; what it was not asked for is unknown.
class table_reader {
public:
  table_reader(loader& l, const toml::table& t, std::string path, std::string generic)
      : l_(l), t_(t), path_(std::move(path)), generic_(std::move(generic)) {}

  /// The node of a key this table may have (null when absent).
  const toml::node* get(std::string_view key);
  /// The key path of `key` in this table.
  std::string path(std::string_view key) const { return join(path_, key); }
  const toml::table& table() const { return t_; }

  void error(const toml::node& n, std::string_view key, std::string message);

  bool read_bool(std::string_view key, bool& out);
  bool read_string(std::string_view key, std::string& out);
  /// An integer in [min, max].
  template <class T> bool read_uint(std::string_view key, uint64_t min, uint64_t max, T& out);
  /// A size: bytes or "<n><unit>" in [min, max], or 0 when `zero` says what
  /// 0 means.
  template <class T>
  bool read_size(std::string_view key, uint64_t min, uint64_t max, const char* zero, T& out);
  /// One of `choices`.
  bool read_choice(std::string_view key, const std::vector<std::string>& choices, std::string& out);
  /// Strings, none twice; each element checked by `check` (empty: fine).
  template <class Check>
  bool read_strings(std::string_view key, std::vector<std::string>& out, Check check);
  /// A subtable (null when absent or not a table, which is reported).
  const toml::table* read_table(std::string_view key);

  /// Reports the keys nobody asked for.
  void finish();

private:
  loader& l_;
  const toml::table& t_;
  std::string path_;
  std::string generic_;
  std::vector<std::string> known_;
};

class loader {
public:
  loader(std::string file, std::string base_dir, bool check_files, std::set<std::string>* registry)
      : file_(std::move(file)), base_dir_(std::move(base_dir)), check_files_(check_files),
        registry_(registry) {}

  std::vector<config_error> errors;
  std::vector<config_error> warnings;
  /// Errors in other files (the tokens file): listed after this file's.
  std::vector<config_error> other_errors;

  void error(place where, std::string key, std::string value, std::string message) {
    errors.push_back(config_error{file_, where.line, where.column, std::move(key), std::move(value),
                                  std::move(message)});
  }
  void warning(place where, std::string key, std::string value, std::string message) {
    warnings.push_back(config_error{file_, where.line, where.column, std::move(key),
                                    std::move(value), std::move(message)});
  }
  void known(const std::string& generic_key) {
    if (registry_)
      registry_->insert(generic_key);
  }

  void load(const toml::table& root, serve_config& cfg);

private:
  std::string absolute(const std::string& path, const std::string& against) const {
    fs::path p{path};
    if (p.is_relative())
      p = fs::path{against} / p;
    return p.lexically_normal().string();
  }

  void read_audit(table_reader& t, audit_config& a, std::string& file_text);
  void read_egress(table_reader& t, proxy::egress_limits& e);
  void read_request_policies(table_reader& t, policy_pool_config& r);
  void read_sessions(table_reader& t, session_limits& s);
  void read_workspaces(table_reader& t, workspace_settings& w);
  void read_pool(table_reader& t, pool_entry& pool, pool_places& where);
  void check_pools(serve_config& cfg, const std::vector<pool_places>& places,
                   place policies_dir_place);
  /// True when the file may be read as a tokens file.
  bool check_tokens_file(const std::string& path, place where);
  void read_auth(table_reader& t, auth_settings& a, place& tokens_place);
  void read_tls(table_reader& t, tls_settings& tls);
  /// The listeners against the auth settings: a plain TCP listener only on
  /// loopback, and only when the file allows it.
  void check_listeners(const serve_config& cfg, const std::vector<place>& listen_places);

  std::string file_;
  std::string base_dir_;
  bool check_files_;
  std::set<std::string>* registry_;
};

const toml::node* table_reader::get(std::string_view key) {
  if (std::find(known_.begin(), known_.end(), key) == known_.end()) {
    known_.emplace_back(key);
    l_.known(join(generic_, key));
  }
  return t_.get(key);
}

void table_reader::error(const toml::node& n, std::string_view key, std::string message) {
  l_.error(place_of(n.source()), path(key), render(n), std::move(message));
}

bool table_reader::read_bool(std::string_view key, bool& out) {
  const auto* n = get(key);
  if (!n)
    return false;
  if (!n->is_boolean()) {
    error(*n, key, std::string("must be true or false, not ") + type_name(*n));
    return false;
  }
  out = n->as_boolean()->get();
  return true;
}

bool table_reader::read_string(std::string_view key, std::string& out) {
  const auto* n = get(key);
  if (!n)
    return false;
  if (!n->is_string()) {
    error(*n, key, std::string("must be a string, not ") + type_name(*n));
    return false;
  }
  out = n->as_string()->get();
  return true;
}

template <class T>
bool table_reader::read_uint(std::string_view key, uint64_t min, uint64_t max, T& out) {
  const auto* n = get(key);
  if (!n)
    return false;
  if (!n->is_integer()) {
    error(*n, key, std::string("must be an integer, not ") + type_name(*n));
    return false;
  }
  const int64_t v = n->as_integer()->get();
  if (v < 0 || static_cast<uint64_t>(v) < min || static_cast<uint64_t>(v) > max) {
    error(*n, key, "must be between " + std::to_string(min) + " and " + std::to_string(max));
    return false;
  }
  out = static_cast<T>(v);
  return true;
}

template <class T>
bool table_reader::read_size(std::string_view key, uint64_t min, uint64_t max, const char* zero,
                             T& out) {
  const auto* n = get(key);
  if (!n)
    return false;
  uint64_t bytes = 0;
  if (n->is_integer()) {
    const int64_t v = n->as_integer()->get();
    if (v < 0) {
      error(*n, key, "a size cannot be negative");
      return false;
    }
    bytes = static_cast<uint64_t>(v);
  } else if (n->is_string()) {
    auto parsed = parse_byte_size(n->as_string()->get());
    if (!parsed.error.empty()) {
      error(*n, key, parsed.error);
      return false;
    }
    bytes = parsed.bytes;
  } else {
    error(*n, key,
          std::string("must be a size (bytes, or a string such as \"256MiB\"), not ") +
              type_name(*n));
    return false;
  }
  if ((bytes < min || bytes > max) && !(zero && bytes == 0)) {
    std::string range =
        "must be between " + format_byte_size(min) + " and " + format_byte_size(max);
    if (zero)
      range += ", or 0 (" + std::string(zero) + ")";
    error(*n, key, range);
    return false;
  }
  out = static_cast<T>(bytes);
  return true;
}

bool table_reader::read_choice(std::string_view key, const std::vector<std::string>& choices,
                               std::string& out) {
  std::string text;
  if (!read_string(key, text))
    return false;
  if (std::find(choices.begin(), choices.end(), text) == choices.end()) {
    std::vector<std::string> quoted_choices;
    for (const auto& c : choices)
      quoted_choices.push_back(toml_quoted(c));
    error(*t_.get(key), key, "must be one of " + join_words(quoted_choices));
    return false;
  }
  out = text;
  return true;
}

template <class Check>
bool table_reader::read_strings(std::string_view key, std::vector<std::string>& out, Check check) {
  const auto* n = get(key);
  if (!n)
    return false;
  if (!n->is_array()) {
    error(*n, key, std::string("must be an array of strings, not ") + type_name(*n));
    return false;
  }
  bool ok = true;
  std::vector<std::string> values;
  const auto& arr = *n->as_array();
  for (std::size_t i = 0; i < arr.size(); ++i) {
    const auto& e = *arr.get(i);
    const std::string where = path(key) + "[" + std::to_string(i) + "]";
    if (!e.is_string()) {
      l_.error(place_of(e.source()), where, render(e),
               std::string("must be a string, not ") + type_name(e));
      ok = false;
      continue;
    }
    const std::string& text = e.as_string()->get();
    if (std::find(values.begin(), values.end(), text) != values.end()) {
      l_.error(place_of(e.source()), where, render(e), "listed twice");
      ok = false;
      continue;
    }
    if (std::string why = check(text); !why.empty()) {
      l_.error(place_of(e.source()), where, render(e), why);
      ok = false;
      continue;
    }
    values.push_back(text);
  }
  if (ok)
    out = std::move(values);
  return ok;
}

const toml::table* table_reader::read_table(std::string_view key) {
  const auto* n = get(key);
  if (!n)
    return nullptr;
  if (!n->is_table()) {
    error(*n, key,
          std::string("must be a table ([") + std::string(path(key)) + "]), not " + type_name(*n));
    return nullptr;
  }
  return n->as_table();
}

void table_reader::finish() {
  for (auto&& [k, v] : t_) {
    const std::string_view key = k.str();
    if (std::find(known_.begin(), known_.end(), key) != known_.end())
      continue;
    std::string message = "unknown key";
    if (auto guess = closest(key, known_))
      message += " (did you mean \"" + *guess + "\"?)";
    else
      message += " (allowed here: " + join_words(known_) + ")";
    l_.error(place_of(k.source()), path(key), render(v), message);
  }
}

// -- sections --------------------------------------------------------------------

/// Why `name` is not a pool name, or empty.
std::string check_pool_name(const std::string& name) {
  if (name.empty() || name.size() > 64)
    return "a pool name has 1 to 64 characters";
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
          c == '-' || c == '.'))
      return "a pool name has only letters, digits, '_', '-' and '.'";
  if (name.rfind("policy-", 0) == 0)
    return "names starting with \"policy-\" are the pools of request policies";
  return {};
}

/// Why `path` is not a normalised absolute path without globs, or empty.
std::string check_bindable_path(const std::string& path) {
  if (path.empty() || path.front() != '/')
    return "must be an absolute path";
  if ((path.size() > 1 && path.back() == '/') || path.find("//") != std::string::npos ||
      path.find("/./") != std::string::npos || path.find("/../") != std::string::npos ||
      (path.size() >= 2 && path.compare(path.size() - 2, 2, "/.") == 0) ||
      (path.size() >= 3 && path.compare(path.size() - 3, 3, "/..") == 0))
    return "must be a normalised path (no trailing '/', '//', '.' or '..')";
  if (path.find_first_of("*?[") != std::string::npos)
    return "must not contain globs (*, ?, [)";
  return {};
}

/// Why `name` is not an audit event selector, or empty.
std::string check_audit_event(const std::string& name) {
  audit_kind kind;
  if (name == "*" || name == "all" || from_string(name, kind) || policy::is_known_syscall(name))
    return {};
  std::vector<std::string> kinds;
  for (auto k : all_audit_kinds)
    kinds.emplace_back(kind_name(k));
  std::string message = "not an audit kind, \"*\", \"all\" or a syscall name libseccomp knows";
  if (auto guess = closest(name, kinds))
    message += " (did you mean \"" + *guess + "\"?)";
  return message;
}

void loader::read_audit(table_reader& t, audit_config& a, std::string& file_text) {
  t.read_string("file", file_text);
  std::vector<std::string> events;
  if (t.read_strings("events", events, check_audit_event))
    a.events = std::set<std::string>(events.begin(), events.end());
  // Selecting events is what enables the records that are not always on.
  a.enabled = !a.events.empty();
  t.read_bool("to_stdout", a.to_stdout);
  t.read_bool("to_stderr", a.to_stderr);
  std::string fsync;
  if (t.read_choice("fsync", {"never", "interval", "every_record"}, fsync))
    from_string(fsync, a.file.fsync);
  t.read_uint("fsync_interval_ms", 1, 3600000, a.file.fsync_interval_ms);
  t.read_size("max_bytes", 4 * kib, tib, "never rotate", a.file.max_bytes);
  t.read_uint("max_files", 1, 1000, a.file.max_files);
  t.read_uint("queue_records", 1, 1u << 20, a.file.queue_records);
  t.read_size("queue_bytes", 64 * kib, gib, nullptr, a.file.queue_bytes);
  t.read_uint("block_timeout_ms", 0, 600000, a.file.block_timeout_ms);
  t.read_uint("subscriber_window", 1, 65536, a.subscriber_window);
  t.read_uint("subscriber_timeout_ms", 1, 600000, a.subscriber_timeout_ms);
  t.read_uint("report_interval_ms", 1, 3600000, a.report_interval_ms);
  t.read_uint("producer_window", 1, 1u << 20, a.producer_window);
  t.finish();
}

void loader::read_egress(table_reader& t, proxy::egress_limits& e) {
  t.read_uint("connections_per_worker", 1, 65536, e.connections_per_worker);
  t.read_uint("connections_total", 1, 1u << 20, e.connections_total);
  t.read_size("bytes_per_exec", 1, tib, "unlimited", e.bytes_per_exec);
  uint64_t ms = 0;
  if (t.read_uint("head_timeout_ms", 1, 600000, ms))
    e.head_timeout = std::chrono::milliseconds(ms);
  t.read_size("max_head_bytes", kib, mib, nullptr, e.max_head_bytes);
  if (t.read_uint("connect_timeout_ms", 1, 600000, ms))
    e.connect_timeout = std::chrono::milliseconds(ms);
  if (t.read_uint("idle_timeout_ms", 1, 86400000, ms))
    e.idle_timeout = std::chrono::milliseconds(ms);
  t.read_size("buffer_bytes", 4 * kib, 16 * mib, nullptr, e.buffer_bytes);
  t.finish();
}

void loader::read_request_policies(table_reader& t, policy_pool_config& r) {
  t.read_uint("max_pools", 0, 1024, r.max_pools);
  t.read_uint("idle_timeout_ms", 1, 86400000, r.idle_timeout_ms);
  t.read_uint("pool_size", 0, 1024, r.pool_size);
  t.read_strings("bindable_paths", r.bindable_paths, check_bindable_path);
  t.read_bool("allow_network", r.allow_network);
  t.read_uint("cache_size", 0, 65536, r.cache_size);
  t.finish();
}

void loader::read_sessions(table_reader& t, session_limits& s) {
  constexpr uint64_t thirty_days_ms = 30ull * 24 * 60 * 60 * 1000;
  t.read_uint("max_sessions", 1, 65536, s.max_sessions);
  t.read_uint("max_per_owner", 1, 65536, s.max_per_owner);
  t.read_uint("default_idle_ttl_ms", 1, thirty_days_ms, s.default_idle_ttl_ms);
  t.read_uint("max_idle_ttl_ms", 1, thirty_days_ms, s.max_idle_ttl_ms);
  t.read_uint("default_lifetime_ms", 1, thirty_days_ms, s.default_max_lifetime_ms);
  t.read_uint("max_lifetime_ms", 1, thirty_days_ms, s.max_lifetime_ms);
  t.read_uint("create_timeout_ms", 1000, 600000, s.create_timeout_ms);
  // A default above its maximum would refuse every session that asks for
  // no TTL: said where the file set one of them.
  auto ordered = [&](const char* low_key, uint64_t low, const char* high_key, uint64_t high) {
    if (low <= high)
      return;
    const char* at = t.table().get(high_key) ? high_key : low_key;
    if (const auto* n = t.get(at))
      t.error(*n, at,
              std::string(low_key) + " (" + std::to_string(low) + ") is above " + high_key +
                  " (" + std::to_string(high) + ")");
  };
  ordered("default_idle_ttl_ms", s.default_idle_ttl_ms, "max_idle_ttl_ms", s.max_idle_ttl_ms);
  ordered("default_lifetime_ms", s.default_max_lifetime_ms, "max_lifetime_ms",
          s.max_lifetime_ms);
  t.finish();
}

void loader::read_workspaces(table_reader& t, workspace_settings& w) {
  t.read_bool("enabled", w.enabled);
  t.read_size("default_quota", 4 * mib, 16 * tib, nullptr, w.default_quota_bytes);
  t.read_size("max_quota", 4 * mib, 16 * tib, nullptr, w.max_quota_bytes);
  t.read_uint("max_count", 1, 1u << 20, w.max_count);
  t.read_size("max_total_quota", 4 * mib, 1024 * tib, "no cap", w.max_total_quota_bytes);
  if (w.default_quota_bytes > w.max_quota_bytes) {
    const char* at = t.table().get("max_quota") ? "max_quota" : "default_quota";
    if (const auto* n = t.get(at))
      t.error(*n, at,
              "default_quota (" + format_byte_size(w.default_quota_bytes) +
                  ") is above max_quota (" + format_byte_size(w.max_quota_bytes) + ")");
  }
  t.finish();
}

void loader::read_pool(table_reader& t, pool_entry& pool, pool_places& where) {
  auto& s = pool.spec;
  where.table = place_of(t.table().source());
  auto place_if = [&](std::string_view key, place& out) {
    if (const auto* n = t.table().get(key))
      out = place_of(n->source());
  };
  if (t.read_string("name", s.name)) {
    place_if("name", where.name);
    if (auto why = check_pool_name(s.name); !why.empty())
      t.error(*t.get("name"), "name", why);
  } else if (!t.table().get("name")) {
    error(where.table, t.path("name"), {}, "missing: every pool needs a name");
  }
  if (t.read_string("policy", pool.policy)) {
    place_if("policy", where.policy);
    if (pool.policy.empty())
      t.error(*t.get("policy"), "policy", "must name a policy of the policy directory or a file");
  } else {
    where.policy = where.table;
  }
  t.read_uint("size", 1, 1024, s.size);
  std::string mode;
  if (t.read_choice("mode", {"isolated", "shared"}, mode))
    from_string(mode, s.mode);
  if (t.read_bool("warm_start", s.warm_start))
    place_if("warm_start", where.warm_start);
  t.read_uint("recycle_after", 0, std::numeric_limits<uint32_t>::max(), s.recycle_after);
  t.read_uint("queue_limit", 0, 1u << 20, s.queue_limit);
  if (t.read_uint("timeout_ms", 1, 86400000, s.default_timeout_ms))
    place_if("timeout_ms", where.limits["timeout_ms"]);
  if (t.read_string("python", s.python)) {
    place_if("python", where.python);
    if (s.python.empty() || s.python.front() != '/')
      t.error(*t.get("python"), "python", "must be an absolute path");
  }
  std::string isolation;
  if (t.read_choice("isolation", {"sandbox", "none"}, isolation)) {
    place_if("isolation", where.isolation);
    s.isolation =
        isolation == "none" ? platform::isolation_mode::none : platform::isolation_mode::namespaces;
  }
  const toml::table* limits = t.read_table("limits");
  toml::table empty;
  table_reader l(*this, limits ? *limits : empty, t.path("limits"), "pools[].limits");
  auto set = [&](std::string_view key, bool read) {
    if (read)
      where.limits[std::string(key)] = place_of(l.table().get(key)->source());
  };
  set("memory", l.read_size("memory", mib, tib, "unlimited", s.limits.memory_bytes));
  set("pids", l.read_uint("pids", 0, 65536, s.limits.pids));
  set("cpu_percent", l.read_uint("cpu_percent", 0, 102400, s.limits.cpu_percent));
  set("stdout", l.read_size("stdout", 0, gib, nullptr, s.stdout_limit));
  set("stderr", l.read_size("stderr", 0, gib, nullptr, s.stderr_limit));
  set("code", l.read_size("code", 1, 32 * mib, nullptr, s.code_limit));
  l.finish();
  t.finish();
}

bool loader::check_tokens_file(const std::string& path, place where) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    error(where, "auth.tokens_file", toml_quoted(path), std::strerror(errno));
    return false;
  }
  if (!S_ISREG(st.st_mode)) {
    error(where, "auth.tokens_file", toml_quoted(path), "not a regular file");
    return false;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    error(where, "auth.tokens_file", toml_quoted(path),
          std::string("mode ") + mode + " lets others than its owner use it (chmod 600)");
    return false;
  }
  return true;
}

void loader::read_auth(table_reader& t, auth_settings& a, place& tokens_place) {
  if (t.read_string("tokens_file", a.tokens_file))
    tokens_place = place_of(t.get("tokens_file")->source());
  std::string mode;
  if (t.read_choice("socket_mode", {"0600", "0660"}, mode))
    a.socket_mode = mode == "0660" ? 0660 : 0600;
  if (t.read_string("socket_group", a.socket_group)) {
    const auto& n = *t.get("socket_group");
    if (a.socket_group.empty()) {
      // The daemon's group, as without the key.
    } else if (a.socket_mode != 0660) {
      t.error(n, "socket_group",
              "the group has no access with socket_mode \"0600\": set socket_mode = \"0660\"");
    } else if (check_files_) {
      // getgrnam_r with a buffer that grows: a group with many members
      // needs more than the usual size.
      std::vector<char> buf(4096);
      group g{};
      group* found = nullptr;
      int rc;
      while ((rc = ::getgrnam_r(a.socket_group.c_str(), &g, buf.data(), buf.size(), &found)) ==
                 ERANGE &&
             buf.size() < (1u << 20))
        buf.resize(buf.size() * 2);
      if (rc != 0)
        t.error(n, "socket_group", std::string("cannot look it up: ") + std::strerror(rc));
      else if (!found)
        t.error(n, "socket_group", "no such group");
      else
        a.socket_gid = found->gr_gid;
    }
  }
  t.read_bool("allow_plaintext_loopback", a.allow_plaintext_loopback);
  t.finish();
}

void loader::read_tls(table_reader& t, tls_settings& tls) {
  const place table = place_of(t.table().source());
  place cert_place = table;
  place key_place = table;
  if (t.read_string("cert_file", tls.cert_file))
    cert_place = place_of(t.get("cert_file")->source());
  if (t.read_string("key_file", tls.key_file))
    key_place = place_of(t.get("key_file")->source());
  t.finish();
  if (tls.cert_file.empty() && tls.key_file.empty())
    return;
  if (tls.cert_file.empty() || tls.key_file.empty()) {
    const bool no_cert = tls.cert_file.empty();
    error(no_cert ? key_place : cert_place, no_cert ? "tls.cert_file" : "tls.key_file", {},
          "missing: [tls] needs both cert_file and key_file");
    tls = {};
    return;
  }
  tls.cert_file = absolute(tls.cert_file, base_dir_);
  tls.key_file = absolute(tls.key_file, base_dir_);
  if (!check_files_)
    return;
  struct stat st {};
  if (::stat(tls.cert_file.c_str(), &st) != 0) {
    error(cert_place, "tls.cert_file", toml_quoted(tls.cert_file), std::strerror(errno));
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    error(cert_place, "tls.cert_file", toml_quoted(tls.cert_file), "not a regular file");
    return;
  }
  if (::stat(tls.key_file.c_str(), &st) != 0) {
    error(key_place, "tls.key_file", toml_quoted(tls.key_file), std::strerror(errno));
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    error(key_place, "tls.key_file", toml_quoted(tls.key_file), "not a regular file");
    return;
  }
  if ((st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    error(key_place, "tls.key_file", toml_quoted(tls.key_file),
          std::string("mode ") + mode + " lets others than its owner read the key (chmod 600)");
    return;
  }
  if (std::string why = api::check_tls_files({tls.cert_file, tls.key_file}); !why.empty())
    error(cert_place, "tls.cert_file", toml_quoted(tls.cert_file), why);
}

void loader::check_listeners(const serve_config& cfg, const std::vector<place>& listen_places) {
  for (std::size_t i = 0; i < cfg.listen.size() && i < listen_places.size(); ++i) {
    std::string why =
        check_listener_security(cfg.listen[i], cfg.auth.allow_plaintext_loopback,
                                !cfg.auth.tokens_file.empty(), !cfg.tls.cert_file.empty());
    if (!why.empty())
      error(listen_places[i], "listen[" + std::to_string(i) + "]", toml_quoted(cfg.listen[i]), why);
  }
}

/// What a policy's limits section sets, by the pool key the config uses.
std::optional<uint64_t> policy_limit(const policy::limits_section& l, const std::string& key) {
  if (key == "memory")
    return l.memory_bytes;
  if (key == "pids")
    return l.pids;
  if (key == "cpu_percent")
    return l.cpu_percent;
  if (key == "stdout")
    return l.stdout_bytes;
  if (key == "stderr")
    return l.stderr_bytes;
  if (key == "code")
    return l.code_bytes;
  if (key == "timeout_ms")
    return l.timeout_ms;
  return std::nullopt;
}

const char* policy_limit_name(const std::string& key) {
  if (key == "memory")
    return "memory_bytes";
  if (key == "stdout")
    return "stdout_bytes";
  if (key == "stderr")
    return "stderr_bytes";
  if (key == "code")
    return "code_bytes";
  return nullptr; // the same name
}

void loader::check_pools(serve_config& cfg, const std::vector<pool_places>& places,
                         place policies_dir_place) {
  // Duplicate names.
  std::map<std::string, std::size_t> first;
  for (std::size_t i = 0; i < cfg.pools.size(); ++i) {
    const auto& name = cfg.pools[i].spec.name;
    auto [it, fresh] = first.emplace(name, i);
    if (!fresh)
      error(places[i].name, "pools[" + std::to_string(i) + "].name", toml_quoted(name),
            "pool name already used by pools[" + std::to_string(it->second) + "] (line " +
                std::to_string(places[it->second].name.line) + ")");
  }
  // The policy directory's policies.
  std::vector<std::string> names;
  bool dir_ok = false;
  if (check_files_ && !cfg.policies.directory.empty()) {
    if (auto files = policy::list_policy_files(cfg.policies.directory)) {
      dir_ok = true;
      for (const auto& f : *files)
        names.push_back(policy::policy_name_of(f));
    } else {
      error(policies_dir_place, "policies.dir", toml_quoted(cfg.policies.directory),
            files.error().describe());
    }
  }
  std::map<std::string, policy::validated<policy::policy_document>> loaded;
  for (std::size_t i = 0; i < cfg.pools.size(); ++i) {
    auto& pool = cfg.pools[i];
    const auto& where = places[i];
    const std::string key = "pools[" + std::to_string(i) + "]";
    pool.policy_is_name = platform::is_policy_name(pool.policy);
    pool.policy_file = pool.policy_is_name ? cfg.policies.directory + "/" + pool.policy + ".json"
                                           : absolute(pool.policy, base_dir_);
    if (pool.spec.warm_start && pool.spec.isolation == platform::isolation_mode::none)
      error(where.warm_start, key + ".warm_start", "true",
            "warm_start starts sandboxed workers: it does not apply to isolation \"none\"");
    if (!check_files_)
      continue;
    if (::access(pool.spec.python.c_str(), X_OK) != 0)
      error(where.python, key + ".python", toml_quoted(pool.spec.python),
            std::string("not executable: ") + std::strerror(errno));
    if (pool.policy.empty())
      continue;
    if (pool.policy_is_name) {
      if (!dir_ok)
        continue;
      if (std::find(names.begin(), names.end(), pool.policy) == names.end()) {
        std::string message = "no policy of that name in " + cfg.policies.directory;
        if (auto guess = closest(pool.policy, names))
          message += " (did you mean \"" + *guess + "\"?)";
        error(where.policy, key + ".policy", toml_quoted(pool.policy), message);
        continue;
      }
    } else {
      struct stat st {};
      if (::stat(pool.policy_file.c_str(), &st) != 0) {
        error(where.policy, key + ".policy", toml_quoted(pool.policy),
              "policy file " + pool.policy_file + ": " + std::strerror(errno));
        continue;
      }
    }
    auto it = loaded.find(pool.policy_file);
    if (it == loaded.end())
      it = loaded
               .emplace(pool.policy_file,
                        policy::load_policy(pool.policy_file, cfg.policies.directory))
               .first;
    const auto& doc = it->second;
    if (!doc) {
      for (const auto& e : doc.errors())
        error(where.policy, key + ".policy", toml_quoted(pool.policy),
              "invalid policy: " + e.describe());
      continue;
    }
    if (pool.spec.warm_start && doc->plugins.namespaces && !doc->plugins.namespaces->enabled)
      error(where.warm_start, key + ".warm_start", "true",
            "warm_start starts sandboxed workers, and policy " + toml_quoted(pool.policy) +
                " turns namespaces off");
    // The policy's limits replace the pool's own: say so where the file
    // sets one the policy replaces.
    for (const auto& [limit, at] : where.limits) {
      auto theirs = policy_limit(doc->limits, limit);
      if (!theirs)
        continue;
      const char* name = policy_limit_name(limit);
      const std::string pool_key =
          key + (limit == "timeout_ms" ? std::string(".") : std::string(".limits.")) + limit;
      warning(at, pool_key, {},
              "policy " + toml_quoted(pool.policy) + " sets limits." + (name ? name : limit) +
                  " = " + std::to_string(*theirs) + ", which the pool uses instead");
    }
  }
}

void loader::load(const toml::table& root, serve_config& cfg) {
  table_reader top(*this, root, "", "");
  // Top level.
  auto check_listen = [](const std::string& address) { return check_listen_address(address); };
  std::vector<place> listen_places;
  if (top.read_strings("listen", cfg.listen, check_listen)) {
    if (cfg.listen.empty())
      top.error(*top.get("listen"), "listen", "must list at least one address");
    for (const auto& e : *top.get("listen")->as_array())
      listen_places.push_back(place_of(e.source()));
  }
  top.read_uint("drain_grace_ms", 0, 3600000, cfg.drain_grace_ms);
  place state_dir_place;
  if (top.read_string("state_dir", cfg.state_dir))
    state_dir_place = place_of(top.get("state_dir")->source());
  // [policies]
  place policies_dir_place;
  {
    const auto* t = top.read_table("policies");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "policies", "policies");
    if (r.read_string("dir", cfg.policies.directory))
      policies_dir_place = place_of(r.get("dir")->source());
    r.read_bool("watch", cfg.policies.watch);
    r.finish();
  }
  // [auth]
  place tokens_place;
  {
    const auto* t = top.read_table("auth");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "auth", "auth");
    read_auth(r, cfg.auth, tokens_place);
  }
  // [tls]
  {
    const auto* t = top.read_table("tls");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "tls", "tls");
    read_tls(r, cfg.tls);
  }
  // [audit]
  std::string audit_file = "audit.jsonl";
  {
    const auto* t = top.read_table("audit");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "audit", "audit");
    read_audit(r, cfg.audit, audit_file);
  }
  // [egress]
  {
    const auto* t = top.read_table("egress");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "egress", "egress");
    read_egress(r, cfg.egress);
  }
  // [request_policies]
  {
    const auto* t = top.read_table("request_policies");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "request_policies", "request_policies");
    read_request_policies(r, cfg.request_policies);
  }
  // [sessions]
  {
    const auto* t = top.read_table("sessions");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "sessions", "sessions");
    read_sessions(r, cfg.sessions);
  }
  // [workspaces]
  {
    const auto* t = top.read_table("workspaces");
    toml::table empty;
    table_reader r(*this, t ? *t : empty, "workspaces", "workspaces");
    read_workspaces(r, cfg.workspaces);
  }
  // [[pools]]
  std::vector<pool_places> places;
  const toml::node* pools = top.get("pools");
  if (pools && !pools->is_array()) {
    top.error(*pools, "pools",
              std::string("must be an array of tables ([[pools]]), not ") + type_name(*pools));
  } else if (pools && pools->as_array()->empty()) {
    top.error(*pools, "pools", "must declare at least one pool");
  } else if (pools) {
    const auto& arr = *pools->as_array();
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const auto& e = *arr.get(i);
      const std::string key = "pools[" + std::to_string(i) + "]";
      if (!e.is_table()) {
        error(place_of(e.source()), key, render(e),
              std::string("must be a table, not ") + type_name(e));
        continue;
      }
      table_reader r(*this, *e.as_table(), key, "pools[]");
      pool_entry entry;
      pool_places where;
      read_pool(r, entry, where);
      cfg.pools.push_back(std::move(entry));
      places.push_back(std::move(where));
    }
  } else {
    // No pools: the one `castellan exec` would run.
    cfg.pools.emplace_back();
    places.emplace_back();
  }
  top.finish();

  // Paths, now that every key is read.
  if (cfg.state_dir.empty())
    cfg.state_dir = default_state_dir();
  cfg.state_dir = absolute(cfg.state_dir, base_dir_);
  if (cfg.listen.empty()) {
    cfg.listen.push_back(default_listen_address());
    listen_places.emplace_back();
  }
  if (!audit_file.empty())
    cfg.audit.file.path = absolute(audit_file, cfg.state_dir);
  if (!cfg.auth.tokens_file.empty())
    cfg.auth.tokens_file = absolute(cfg.auth.tokens_file, base_dir_);
  if (cfg.policies.directory.empty()) {
    if (auto layout = platform::find_install_layout(); layout && !layout->policies_dir.empty())
      cfg.policies.directory = layout->policies_dir;
    else if (check_files_)
      error(policies_dir_place, "policies.dir", {},
            "not given, and no installed policies were found beside this program");
  } else {
    cfg.policies.directory = absolute(cfg.policies.directory, base_dir_);
  }
  cfg.request_policies.policy_dir = cfg.policies.directory;

  if (check_files_) {
    struct stat st {};
    if (::stat(cfg.state_dir.c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      error(state_dir_place, "state_dir", toml_quoted(cfg.state_dir),
            "exists and is not a directory");
  }
  check_pools(cfg, places, policies_dir_place);
  if (check_files_ && !cfg.auth.tokens_file.empty() &&
      check_tokens_file(cfg.auth.tokens_file, tokens_place)) {
    std::vector<std::string> pool_names;
    for (const auto& p : cfg.pools)
      pool_names.push_back(p.spec.name);
    auto tokens = load_tokens_file(cfg.auth.tokens_file, pool_names);
    for (auto& e : tokens.errors)
      other_errors.push_back(std::move(e));
    cfg.auth.tokens = std::move(tokens.tokens);
  }
  check_listeners(cfg, listen_places);
}

std::string directory_of(const std::string& path) {
  const auto slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

/// The place of the first dotted key (or table header) of more than
/// max_key_dots dots, if any. toml++ bounds the nesting of arrays and inline
/// tables (256), but not the tables a dotted key creates, and recurses over
/// them: `a.a.a…` with 100,000 dots overflows the stack. No castellan key has
/// more than two dots; this scan, linear and without recursion, lets only
/// shallow keys reach the parser. It skips strings and comments and counts
/// the dots of a chain of key segments; anything but a segment, a dot or a
/// blank (',', '=', a bracket, a newline) ends the chain.
std::optional<place> too_deep_key(std::string_view text) {
  uint32_t line = 1;
  std::size_t line_start = 0;
  std::size_t dots = 0;
  auto is_bare = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\n') {
      ++line;
      line_start = i + 1;
      dots = 0;
    } else if (c == '#') {
      while (i + 1 < text.size() && text[i + 1] != '\n')
        ++i;
    } else if (c == '"' || c == '\'') {
      // A string: a quoted key segment or a value. Multi-line ones may
      // span lines (counted), and end a chain: no key spans lines.
      const bool multi = text.substr(i, 3) == std::string(3, c);
      const std::size_t open = multi ? 3 : 1;
      std::size_t j = i + open;
      for (; j < text.size(); ++j) {
        if (text[j] == '\n') {
          if (!multi)
            break;
          ++line;
          line_start = j + 1;
          dots = 0;
        } else if (c == '"' && text[j] == '\\') {
          ++j;
        } else if (text[j] == c && (!multi || text.substr(j, 3) == std::string(3, c))) {
          j += open - 1;
          break;
        }
      }
      i = j < text.size() && text[j] == '\n' ? j - 1 : j;
    } else if (c == '.') {
      if (++dots > max_key_dots)
        return place{line, static_cast<uint32_t>(i - line_start + 1)};
    } else if (!is_bare(c) && c != ' ' && c != '\t') {
      dots = 0;
    }
  }
  return std::nullopt;
}

config_load run(std::string_view text, const std::string& source, const std::string& base_dir,
                bool check_files, std::set<std::string>* registry) {
  config_load out;
  out.config.source = source;
  loader l{source, fs::absolute(base_dir).lexically_normal().string(), check_files, registry};
  if (auto deep = too_deep_key(text)) {
    l.error(*deep, {}, {},
            "a key nested deeper than " + std::to_string(max_key_dots + 1) + " levels (more than " +
                std::to_string(max_key_dots) + " dots)");
  } else {
    try {
      toml::table root = toml::parse(text, source);
      l.load(root, out.config);
    } catch (const toml::parse_error& e) {
      l.error(place_of(e.source()), {}, {}, std::string(e.description()) + " (TOML syntax)");
    }
  }
  auto by_place = [](const config_error& a, const config_error& b) {
    // Errors without a place (found beyond the file) come last.
    const auto la = a.line == 0 ? std::numeric_limits<uint32_t>::max() : a.line;
    const auto lb = b.line == 0 ? std::numeric_limits<uint32_t>::max() : b.line;
    return la != lb ? la < lb : a.column < b.column;
  };
  std::stable_sort(l.errors.begin(), l.errors.end(), by_place);
  std::stable_sort(l.warnings.begin(), l.warnings.end(), by_place);
  out.errors = std::move(l.errors);
  for (auto& e : l.other_errors)
    out.errors.push_back(std::move(e));
  out.warnings = std::move(l.warnings);
  return out;
}

} // namespace

std::optional<std::pair<uint32_t, uint32_t>> find_too_deep_key(std::string_view text) {
  if (auto deep = too_deep_key(text))
    return std::make_pair(deep->line, deep->column);
  return std::nullopt;
}

config_load parse_serve_config(std::string_view text, const std::string& source,
                               const std::string& base_dir) {
  return run(text, source, base_dir, true, nullptr);
}

config_load load_serve_config(const std::string& path) {
  auto file = read_regular_file(path, max_config_bytes, false);
  if (!file.error.empty()) {
    config_load out;
    out.config.source = path;
    out.errors.push_back(config_error{path, 0, 0, {}, {}, std::move(file.error)});
    return out;
  }
  const std::string& text = file.text;
  return parse_serve_config(text, path, directory_of(path));
}

config_load builtin_serve_config() {
  return parse_serve_config({}, "<built-in>", ".");
}

std::vector<std::string> known_config_keys() {
  std::set<std::string> keys;
  run("[[pools]]\nname = \"x\"\n", "<keys>", ".", false, &keys);
  // Only the leaves: a table's own key is not a setting.
  std::vector<std::string> out;
  for (const auto& k : keys) {
    const bool has_child = std::any_of(keys.begin(), keys.end(), [&](const std::string& other) {
      return other.size() > k.size() && other.compare(0, k.size(), k) == 0 &&
             (other[k.size()] == '.' || other[k.size()] == '[');
    });
    if (!has_child)
      out.push_back(k);
  }
  return out;
}

} // namespace castellan::config
