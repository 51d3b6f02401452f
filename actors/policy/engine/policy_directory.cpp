#include "actors/policy/engine/policy_directory.hpp"

#include <dirent.h>

#include <algorithm>
#include <memory>

namespace castellan::policy {

bool is_policy_file_name(const std::string& file_name) {
  constexpr std::string_view ext = ".json";
  if (file_name.size() <= ext.size() || file_name.front() == '.')
    return false;
  if (file_name.compare(file_name.size() - ext.size(), ext.size(), ext) != 0)
    return false;
  return file_name != "schema.json";
}

std::string policy_name_of(const std::string& path) {
  const auto slash = path.rfind('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.size() > 5 && base.compare(base.size() - 5, 5, ".json") == 0)
    base.resize(base.size() - 5);
  return base;
}

outcome<std::vector<std::string>> list_policy_files(const std::string& dir) {
  std::unique_ptr<DIR, int (*)(DIR*)> d{::opendir(dir.c_str()), &::closedir};
  if (!d)
    return errno_failure("open policy directory " + dir);
  std::vector<std::string> out;
  while (const dirent* e = ::readdir(d.get())) {
    const std::string name = e->d_name;
    if (e->d_type != DT_REG && e->d_type != DT_LNK && e->d_type != DT_UNKNOWN)
      continue;
    if (is_policy_file_name(name))
      out.push_back(dir.back() == '/' ? dir + name : dir + "/" + name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace castellan::policy
