#include "actors/telemetry/prometheus_exposition.hpp"

#include <cmath>
#include <cstdio>

namespace castellan {

namespace {

// Appends `s` with invalid UTF-8 sequences replaced by U+FFFD, so that a
// label taken from configuration cannot make the whole exposition unparsable.
void append_utf8(std::string& out, std::string_view s, bool label) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t len = 0;
    if (c < 0x80)
      len = 1;
    else if ((c & 0xE0) == 0xC0 && c >= 0xC2)
      len = 2;
    else if ((c & 0xF0) == 0xE0)
      len = 3;
    else if ((c & 0xF8) == 0xF0 && c <= 0xF4)
      len = 4;
    bool ok = len > 0 && i + len <= s.size();
    for (size_t k = 1; ok && k < len; ++k)
      ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && len == 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0); // overlong, surrogates
    }
    if (ok && len == 4) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (!ok) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    if (len == 1) {
      if (c == '\\')
        out += "\\\\";
      else if (c == '\n')
        out += "\\n";
      else if (label && c == '"')
        out += "\\\"";
      else
        out += static_cast<char>(c);
    } else {
      out.append(s.substr(i, len));
    }
    i += len;
  }
}

void append_labels(std::string& out, const metric_labels& labels, const char* le = nullptr) {
  if (labels.empty() && le == nullptr)
    return;
  out += '{';
  bool first = true;
  for (const auto& [k, v] : labels) {
    if (!first)
      out += ',';
    first = false;
    out += k;
    out += "=\"";
    out += escape_label_value(v);
    out += '"';
  }
  if (le != nullptr) {
    if (!first)
      out += ',';
    out += "le=\"";
    out += le;
    out += '"';
  }
  out += '}';
}

} // namespace

std::string escape_label_value(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  append_utf8(out, value, true);
  return out;
}

std::string escape_help(std::string_view help) {
  std::string out;
  out.reserve(help.size());
  append_utf8(out, help, false);
  return out;
}

std::string format_sample_value(double v) {
  if (std::isnan(v))
    return "NaN";
  if (std::isinf(v))
    return v > 0 ? "+Inf" : "-Inf";
  char buf[40];
  if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0)
    std::snprintf(buf, sizeof(buf), "%.0f", v);
  else
    std::snprintf(buf, sizeof(buf), "%.17g", v);
  return buf;
}

std::string format_us_as_seconds(uint64_t us) {
  std::string out = std::to_string(us / 1000000);
  uint64_t frac = us % 1000000;
  if (frac == 0)
    return out;
  char buf[8];
  std::snprintf(buf, sizeof(buf), "%06llu", static_cast<unsigned long long>(frac));
  std::string digits = buf;
  while (!digits.empty() && digits.back() == '0')
    digits.pop_back();
  return out + "." + digits;
}

std::string to_prometheus_text(const metrics_registry& reg) {
  std::string out;
  for (const auto& [name, f] : reg.families()) {
    out += "# HELP " + name + " " + escape_help(f.help) + "\n";
    out += "# TYPE " + name + " " + std::string{type_name(f.type)} + "\n";
    if (f.type != metric_type::histogram) {
      for (const auto& [labels, v] : f.values) {
        out += name;
        append_labels(out, labels);
        out += ' ';
        out += format_sample_value(v);
        out += '\n';
      }
      continue;
    }
    for (const auto& [labels, h] : f.histograms) {
      for (size_t i = 0; i < histogram::bucket_count; ++i) {
        out += name + "_bucket";
        append_labels(out, labels, format_us_as_seconds(histogram::bound_us(i)).c_str());
        out += ' ' + std::to_string(h.cumulative(i)) + '\n';
      }
      out += name + "_bucket";
      append_labels(out, labels, "+Inf");
      out += ' ' + std::to_string(h.count()) + '\n';
      out += name + "_sum";
      append_labels(out, labels);
      out += ' ' + format_us_as_seconds(h.sum_us()) + '\n';
      out += name + "_count";
      append_labels(out, labels);
      out += ' ' + std::to_string(h.count()) + '\n';
    }
  }
  return out;
}

} // namespace castellan
