#include "actors/api/audit_params.hpp"

#include "actors/api/percent_decoding.hpp"
#include "actors/audit/audit_kind.hpp"
#include "actors/audit/audit_query.hpp"

namespace castellan::api {

namespace {

api_error bad(std::string field, std::string message) {
  api_error e;
  e.status = 400;
  e.code = "invalid_request";
  e.message = std::move(message);
  e.field = std::move(field);
  return e;
}

std::string known_kinds() {
  std::string known;
  for (auto x : all_audit_kinds)
    known += (known.empty() ? "" : ", ") + std::string{kind_name(x)};
  return known;
}

} // namespace

std::variant<audit_params, api_error> parse_audit_params(std::string_view query, int64_t now_ns) {
  audit_params out;
  bool exec_seen = false;
  bool since_seen = false;
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (pair.empty())
      continue;
    const auto eq = pair.find('=');
    std::string name;
    std::string value;
    if (!percent_decode(pair.substr(0, eq), name) ||
        !percent_decode(eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1),
                        value))
      return bad(name.empty() ? std::string(pair.substr(0, eq)) : name,
                 "a malformed percent-escape in the query");
    if (name == "kind") {
      std::string_view rest = value;
      while (true) {
        const auto comma = rest.find(',');
        const std::string_view k = rest.substr(0, comma);
        audit_kind parsed;
        if (!from_string(k, parsed))
          return bad("kind",
                     "unknown audit kind '" + std::string(k) + "' (known: " + known_kinds() + ")");
        out.kinds.insert(std::string(k));
        if (comma == std::string_view::npos)
          break;
        rest.remove_prefix(comma + 1);
      }
    } else if (name == "exec") {
      uint64_t v = 0;
      bool ok = !value.empty() && value.size() <= 20 && !exec_seen;
      for (char c : value) {
        if (c < '0' || c > '9' || v > (UINT64_MAX - static_cast<uint64_t>(c - '0')) / 10) {
          ok = false;
          break;
        }
        v = v * 10 + static_cast<uint64_t>(c - '0');
      }
      if (!ok || v == 0)
        return bad("exec",
                   exec_seen ? "exec is given twice"
                             : "exec wants one exec id (a positive decimal), not '" + value + "'");
      exec_seen = true;
      out.exec_id = v;
    } else if (name == "since") {
      int64_t ns = 0;
      if (since_seen)
        return bad("since", "since is given twice");
      if (!parse_since(value, now_ns, ns))
        return bad("since", "since wants an RFC 3339 time or a duration such as 90s, 15m, 2h, "
                            "1d; got '" +
                                value + "'");
      since_seen = true;
      out.since_ns = ns;
    } else {
      return bad(name, "unknown query parameter '" + name +
                           "' (GET /v1/audit takes kind, exec "
                           "and since)");
    }
  }
  return out;
}

} // namespace castellan::api
