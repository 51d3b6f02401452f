#include "exposition_validator.hpp"

#include <cmath>
#include <cstdlib>
#include <set>

namespace castellan::test {

namespace {

bool metric_name_ok(const std::string& s) {
  if (s.empty())
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

bool label_name_ok(const std::string& s) {
  if (s.empty() || s.rfind("__", 0) == 0)
    return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                    (i > 0 && c >= '0' && c <= '9');
    if (!ok)
      return false;
  }
  return true;
}

bool utf8_ok(const std::string& s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > s.size())
      return false;
    for (size_t k = 1; k < len; ++k)
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80)
        return false;
    i += len;
  }
  return true;
}

bool parse_float(const std::string& s, double& out) {
  if (s == "+Inf" || s == "Inf") {
    out = INFINITY;
    return true;
  }
  if (s == "-Inf") {
    out = -INFINITY;
    return true;
  }
  if (s == "NaN") {
    out = NAN;
    return true;
  }
  if (s.empty())
    return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' || c == '+' || c == '-'))
      return false;
  char* end = nullptr;
  out = std::strtod(s.c_str(), &end);
  return end == s.c_str() + s.size();
}

// The family a sample name belongs to, given the family currently open.
std::string family_of(const std::string& sample, const std::string& current,
                      const std::map<std::string, parsed_family>& fams) {
  auto it = fams.find(current);
  if (it != fams.end() && it->second.type == "histogram") {
    for (const char* suffix : {"_bucket", "_sum", "_count"})
      if (sample == current + suffix)
        return current;
  }
  return sample;
}

} // namespace

std::optional<double> parsed_exposition::value(const std::string& name,
                                               const label_map& labels) const {
  for (const auto& [fname, fam] : families)
    for (const auto& s : fam.samples)
      if (s.name == name && s.labels == labels)
        return s.value;
  return std::nullopt;
}

parsed_exposition parse_exposition(const std::string& text) {
  parsed_exposition out;
  auto fail = [&](size_t line_no, const std::string& why) {
    out.errors.push_back("line " + std::to_string(line_no) + ": " + why);
  };
  if (!utf8_ok(text))
    out.errors.push_back("not UTF-8");
  if (text.empty() || text.back() != '\n')
    out.errors.push_back("does not end in a newline");
  std::set<std::string> closed; // families whose samples ended
  std::set<std::string> series; // name + labels, for duplicates
  std::set<std::string> helped, typed;
  std::string current; // the family whose samples come now
  size_t line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    const auto nl = text.find('\n', pos);
    const std::string line =
        text.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? text.size() : nl + 1;
    ++line_no;
    if (line.empty()) {
      fail(line_no, "empty line");
      continue;
    }
    if (line.find('\r') != std::string::npos)
      fail(line_no, "carriage return");
    if (line[0] == '#') {
      if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
        const bool help = line[2] == 'H';
        const auto rest = line.substr(7);
        const auto sp = rest.find(' ');
        const auto name = rest.substr(0, sp);
        const auto arg = sp == std::string::npos ? std::string{} : rest.substr(sp + 1);
        if (!metric_name_ok(name))
          fail(line_no, "bad metric name in HELP/TYPE: " + name);
        if (closed.count(name) > 0 || (name != current && out.families.count(name) > 0 &&
                                       !out.families[name].samples.empty()))
          fail(line_no, "HELP/TYPE after samples of " + name);
        if (name != current) {
          if (!current.empty())
            closed.insert(current);
          current = name;
        }
        auto& fam = out.families[name];
        if (help) {
          if (!helped.insert(name).second)
            fail(line_no, "second HELP for " + name);
          for (size_t i = 0; i < arg.size(); ++i)
            if (arg[i] == '\\') {
              if (i + 1 >= arg.size() || (arg[i + 1] != '\\' && arg[i + 1] != 'n'))
                fail(line_no, "bad escape in HELP");
              ++i;
            }
          fam.help = arg;
        } else {
          if (!typed.insert(name).second)
            fail(line_no, "second TYPE for " + name);
          if (!fam.samples.empty())
            fail(line_no, "TYPE after samples of " + name);
          static const std::set<std::string> types{"counter", "gauge", "histogram", "summary",
                                                   "untyped"};
          if (types.count(arg) == 0)
            fail(line_no, "unknown type " + arg);
          fam.type = arg;
        }
      }
      continue; // other comments are allowed
    }
    // A sample: name [{labels}] value [timestamp]
    parsed_sample s;
    size_t i = 0;
    while (i < line.size() && line[i] != '{' && line[i] != ' ')
      ++i;
    s.name = line.substr(0, i);
    if (!metric_name_ok(s.name))
      fail(line_no, "bad sample name " + s.name);
    std::string labels_key;
    if (i < line.size() && line[i] == '{') {
      ++i;
      bool first = true;
      while (i < line.size() && line[i] != '}') {
        if (!first) {
          if (line[i] != ',') {
            fail(line_no, "expected ',' between labels");
            break;
          }
          ++i;
        }
        first = false;
        const auto eq = line.find('=', i);
        if (eq == std::string::npos) {
          fail(line_no, "label without '='");
          break;
        }
        const auto lname = line.substr(i, eq - i);
        if (!label_name_ok(lname))
          fail(line_no, "bad label name '" + lname + "'");
        i = eq + 1;
        if (i >= line.size() || line[i] != '"') {
          fail(line_no, "label value not quoted");
          break;
        }
        ++i;
        std::string value;
        bool closed_quote = false;
        while (i < line.size()) {
          const char c = line[i];
          if (c == '\\') {
            if (i + 1 >= line.size()) {
              fail(line_no, "dangling escape");
              break;
            }
            const char e = line[i + 1];
            if (e == '\\')
              value += '\\';
            else if (e == '"')
              value += '"';
            else if (e == 'n')
              value += '\n';
            else
              fail(line_no, std::string("bad escape \\") + e);
            i += 2;
            continue;
          }
          if (c == '"') {
            closed_quote = true;
            ++i;
            break;
          }
          value += c;
          ++i;
        }
        if (!closed_quote) {
          fail(line_no, "unterminated label value");
          break;
        }
        if (!s.labels.emplace(lname, value).second)
          fail(line_no, "duplicate label " + lname);
      }
      if (i >= line.size() || line[i] != '}') {
        fail(line_no, "unterminated label set");
        continue;
      }
      ++i;
    }
    if (i >= line.size() || line[i] != ' ') {
      fail(line_no, "no value");
      continue;
    }
    ++i;
    const auto rest = line.substr(i);
    const auto sp = rest.find(' ');
    const auto vtext = rest.substr(0, sp);
    if (!parse_float(vtext, s.value))
      fail(line_no, "bad value '" + vtext + "'");
    if (sp != std::string::npos) {
      const auto ts = rest.substr(sp + 1);
      if (ts.empty() || ts.find_first_not_of("-0123456789") != std::string::npos)
        fail(line_no, "bad timestamp '" + ts + "'");
    }
    const auto fam_name = family_of(s.name, current, out.families);
    if (fam_name != current) {
      if (closed.count(fam_name) > 0 || out.families.count(fam_name) > 0)
        fail(line_no, "samples of " + fam_name + " are not contiguous");
      if (!current.empty())
        closed.insert(current);
      current = fam_name;
    }
    auto& fam = out.families[fam_name];
    if (fam.type.empty())
      fail(line_no, "sample of " + fam_name + " without TYPE");
    if (fam.type == "counter" && !(s.value >= 0))
      fail(line_no, "negative or NaN counter");
    for (const auto& [k, v] : s.labels)
      labels_key += k + "=" + v + "\x1f";
    if (!series.insert(s.name + "\x1e" + labels_key).second)
      fail(line_no, "duplicate series " + s.name + "{" + labels_key + "}");
    fam.samples.push_back(std::move(s));
  }
  // Histogram semantics, per label set without `le`.
  for (const auto& [name, fam] : out.families) {
    if (fam.type != "histogram")
      continue;
    struct hist {
      std::vector<std::pair<double, double>> buckets; // le, count, in text order
      std::optional<double> sum, count;
    };
    std::map<label_map, hist> hs;
    for (const auto& s : fam.samples) {
      auto base = s.labels;
      if (s.name == name + "_bucket") {
        auto le = base.find("le");
        if (le == base.end()) {
          out.errors.push_back(name + ": bucket without le");
          continue;
        }
        double bound = 0;
        if (!parse_float(le->second, bound))
          out.errors.push_back(name + ": bad le " + le->second);
        base.erase(le);
        hs[base].buckets.emplace_back(bound, s.value);
      } else if (s.name == name + "_sum") {
        hs[base].sum = s.value;
      } else if (s.name == name + "_count") {
        hs[base].count = s.value;
      } else {
        out.errors.push_back(name + ": unexpected sample " + s.name);
      }
    }
    for (const auto& [labels, h] : hs) {
      if (h.buckets.empty() || !std::isinf(h.buckets.back().first))
        out.errors.push_back(name + ": no +Inf bucket last");
      for (size_t k = 1; k < h.buckets.size(); ++k) {
        if (!(h.buckets[k].first > h.buckets[k - 1].first))
          out.errors.push_back(name + ": le not increasing");
        if (h.buckets[k].second < h.buckets[k - 1].second)
          out.errors.push_back(name + ": bucket counts not cumulative");
      }
      if (!h.sum || !h.count)
        out.errors.push_back(name + ": missing _sum or _count");
      else if (!h.buckets.empty() && h.buckets.back().second != *h.count)
        out.errors.push_back(name + ": +Inf bucket != _count");
      for (const auto& b : h.buckets)
        if (b.second < 0 || b.second != std::floor(b.second))
          out.errors.push_back(name + ": bucket count not a whole number");
    }
  }
  return out;
}

} // namespace castellan::test
