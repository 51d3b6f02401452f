#include "config/tokens_loader.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <sstream>

#include <toml++/toml.h>

#include "config/config_loader.hpp"
#include "config/regular_file.hpp"

namespace castellan::config {

namespace {

/// The longest token name: names go into log lines.
constexpr std::size_t max_name = 64;

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
  default:
    return "a date or time";
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

std::string toml_quoted(std::string_view text) {
  return render(toml::value<std::string>{std::string{text}});
}

std::string join_words(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words)
    out += (out.empty() ? "" : ", ") + w;
  return out;
}

class tokens_reader {
public:
  tokens_reader(std::string source, const std::vector<std::string>& pools)
      : source_(std::move(source)), pools_(pools) {}

  void error(const toml::source_region& at, std::string key, std::string value,
             std::string message) {
    out.errors.push_back(config_error{source_, at.begin.line, at.begin.column, std::move(key),
                                      std::move(value), std::move(message)});
  }
  void error(const toml::node& n, std::string key, std::string message) {
    error(n.source(), std::move(key), render(n), std::move(message));
  }

  void read(const toml::table& root) {
    for (auto&& [k, v] : root) {
      if (k.str() != "tokens")
        error(k.source(), std::string(k.str()), render(v),
              "unknown key (a tokens file has only [[tokens]] tables)");
    }
    const toml::node* tokens = root.get("tokens");
    if (!tokens)
      return;
    if (!tokens->is_array()) {
      error(*tokens, "tokens",
            std::string("must be an array of tables ([[tokens]]), not ") + type_name(*tokens));
      return;
    }
    const auto& arr = *tokens->as_array();
    for (std::size_t i = 0; i < arr.size(); ++i) {
      const auto& e = *arr.get(i);
      const std::string key = "tokens[" + std::to_string(i) + "]";
      if (!e.is_table()) {
        error(e, key, std::string("must be a table, not ") + type_name(e));
        continue;
      }
      read_token(*e.as_table(), key);
    }
  }

  tokens_load out;

private:
  void read_token(const toml::table& t, const std::string& key) {
    static const std::vector<std::string> known = {"name", "sha256", "pools", "max_concurrent"};
    bool ok = true;
    for (auto&& [k, v] : t) {
      if (std::find(known.begin(), known.end(), k.str()) == known.end()) {
        error(k.source(), key + "." + std::string(k.str()), render(v),
              "unknown key (allowed here: " + join_words(known) + ")");
        ok = false;
      }
    }
    api::token_entry entry;
    // name
    if (const auto* n = t.get("name")) {
      if (!n->is_string()) {
        error(*n, key + ".name", std::string("must be a string, not ") + type_name(*n));
        ok = false;
      } else {
        entry.name = n->as_string()->get();
        const bool plain = std::all_of(entry.name.begin(), entry.name.end(), [](char c) {
          return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '-' || c == '.' || c == '@';
        });
        if (entry.name.empty() || entry.name.size() > max_name || !plain) {
          error(*n, key + ".name",
                "a token name has 1 to 64 letters, digits, '_', '-', '.' or '@'");
          ok = false;
        } else if (auto it = names_.find(entry.name); it != names_.end()) {
          error(*n, key + ".name", "token name already used by " + it->second);
          ok = false;
        } else {
          names_.emplace(entry.name,
                         key + " (line " + std::to_string(n->source().begin.line) + ")");
        }
      }
    } else {
      error(t.source(), key + ".name", {}, "missing: every token needs a name");
      ok = false;
    }
    // sha256
    if (const auto* n = t.get("sha256")) {
      std::optional<api::token_digest> d;
      if (n->is_string())
        d = api::digest_from_hex(n->as_string()->get());
      if (!d) {
        error(*n, key + ".sha256",
              "must be the token's SHA-256 as 64 hex digits (castellan token new prints it)");
        ok = false;
      } else if (auto it = digests_.find(api::to_hex(*d)); it != digests_.end()) {
        error(*n, key + ".sha256", "the same token as " + it->second);
        ok = false;
      } else {
        entry.sha256 = *d;
        digests_.emplace(api::to_hex(*d),
                         key + " (line " + std::to_string(n->source().begin.line) + ")");
      }
    } else {
      error(t.source(), key + ".sha256", {}, "missing: every token needs the sha256 of its secret");
      ok = false;
    }
    // pools
    if (const auto* n = t.get("pools")) {
      if (!n->is_array()) {
        error(*n, key + ".pools",
              std::string("must be an array of pool names, not ") + type_name(*n));
        ok = false;
      } else {
        std::vector<std::string> names;
        const auto& arr = *n->as_array();
        for (std::size_t i = 0; i < arr.size(); ++i) {
          const auto& e = *arr.get(i);
          const std::string where = key + ".pools[" + std::to_string(i) + "]";
          if (!e.is_string()) {
            error(e, where, std::string("must be a string, not ") + type_name(e));
            ok = false;
            continue;
          }
          const std::string& name = e.as_string()->get();
          if (std::find(names.begin(), names.end(), name) != names.end()) {
            error(e, where, "listed twice");
            ok = false;
            continue;
          }
          if (std::find(pools_.begin(), pools_.end(), name) == pools_.end()) {
            std::vector<std::string> q;
            for (const auto& p : pools_)
              q.push_back(toml_quoted(p));
            error(e, where,
                  "no pool of that name in the config (its pools: " + join_words(q) + ")");
            ok = false;
            continue;
          }
          names.push_back(name);
        }
        entry.pools = std::move(names);
      }
    }
    // max_concurrent
    if (const auto* n = t.get("max_concurrent")) {
      const int64_t v = n->is_integer() ? n->as_integer()->get() : -1;
      if (!n->is_integer()) {
        error(*n, key + ".max_concurrent", std::string("must be an integer, not ") + type_name(*n));
        ok = false;
      } else if (v < 1 || v > 65536) {
        error(*n, key + ".max_concurrent",
              "must be between 1 and 65536 (leave it out for no per-token limit)");
        ok = false;
      } else {
        entry.max_concurrent = static_cast<uint32_t>(v);
      }
    }
    if (ok)
      out.tokens.push_back(std::move(entry));
  }

  std::string source_;
  const std::vector<std::string>& pools_;
  std::map<std::string, std::string> names_;   ///< name → where it was first
  std::map<std::string, std::string> digests_; ///< hex digest → where it was first
};

} // namespace

tokens_load parse_tokens_file(std::string_view text, const std::string& source,
                              const std::vector<std::string>& pools) {
  tokens_reader r{source, pools};
  if (auto deep = find_too_deep_key(text)) {
    r.out.errors.push_back(config_error{source,
                                        deep->first,
                                        deep->second,
                                        {},
                                        {},
                                        "a key nested deeper than the config loader allows"});
    return std::move(r.out);
  }
  try {
    toml::table root = toml::parse(text, source);
    r.read(root);
  } catch (const toml::parse_error& e) {
    r.error(e.source(), {}, {}, std::string(e.description()) + " (TOML syntax)");
  }
  if (!r.out.ok())
    r.out.tokens.clear();
  return std::move(r.out);
}

tokens_load load_tokens_file(const std::string& path, const std::vector<std::string>& pools) {
  // The mode is checked again here, on what is read: the config loader's
  // check saw the path, which may name another file by now.
  auto file = read_regular_file(path, max_config_bytes, true);
  if (!file.error.empty()) {
    tokens_load out;
    out.errors.push_back(config_error{path, 0, 0, {}, {}, std::move(file.error)});
    return out;
  }
  return parse_tokens_file(file.text, path, pools);
}

} // namespace castellan::config
