#include "platform/linux/mount_table.hpp"

#include <sys/sysmacros.h>

#include <sstream>

#include "platform/linux/file_io.hpp"

namespace castellan::platform {

namespace {

/// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape(const std::string& field) {
  std::string out;
  out.reserve(field.size());
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const char a = field[i + 1], b = field[i + 2], c = field[i + 3];
      if (a >= '0' && a <= '3' && b >= '0' && b <= '7' && c >= '0' && c <= '7') {
        out.push_back(static_cast<char>((a - '0') * 64 + (b - '0') * 8 + (c - '0')));
        i += 3;
        continue;
      }
    }
    out.push_back(field[i]);
  }
  return out;
}

bool covers(const std::string& dir, const std::string& path) {
  if (path.compare(0, dir.size(), dir) != 0)
    return false;
  return path.size() == dir.size() || dir == "/" || path[dir.size()] == '/';
}

} // namespace

outcome<std::vector<mount_entry_info>> parse_mountinfo(const std::string& text) {
  std::vector<mount_entry_info> out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    if (line.empty())
      continue;
    std::istringstream in(line);
    mount_entry_info e;
    std::string devno, root, point, options, field;
    if (!(in >> e.id >> e.parent_id >> devno >> root >> point >> options))
      return logic_failure("mountinfo: cannot parse '" + line + "'");
    while (in >> field && field != "-") {
    }
    if (field != "-" || !(in >> e.fs_type >> e.source))
      return logic_failure("mountinfo: no file system type in '" + line + "'");
    const auto colon = devno.find(':');
    auto major = parse_u64(devno.substr(0, colon));
    auto minor = colon == std::string::npos ? std::nullopt : parse_u64(devno.substr(colon + 1));
    if (!major || !minor || *major > 0xfffff || *minor > 0xfffff)
      return logic_failure("mountinfo: bad device '" + devno + "'");
    e.device = makedev(static_cast<unsigned>(*major), static_cast<unsigned>(*minor));
    e.root = unescape(root);
    e.mount_point = unescape(point);
    e.fs_type = unescape(e.fs_type);
    e.source = unescape(e.source);
    out.push_back(std::move(e));
  }
  return out;
}

outcome<std::vector<mount_entry_info>> mounts_at_or_below(const std::string& dir) {
  auto text = read_text_file("/proc/self/mountinfo", 64u << 20);
  if (!text)
    return text.error();
  auto all = parse_mountinfo(*text);
  if (!all)
    return all.error();
  std::vector<mount_entry_info> out;
  for (auto& e : *all)
    if (covers(dir, e.mount_point))
      out.push_back(std::move(e));
  return out;
}

} // namespace castellan::platform
