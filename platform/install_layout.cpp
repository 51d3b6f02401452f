#include "platform/install_layout.hpp"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <vector>

namespace castellan::platform {

namespace {

bool is_file(const std::string& path, int mode) {
  return ::access(path.c_str(), mode) == 0;
}

std::string dirname_of(const std::string& path) {
  auto pos = path.find_last_of('/');
  return pos == std::string::npos ? std::string(".") : path.substr(0, pos);
}

/// The first candidate that exists, or empty.
std::string first_existing(const std::vector<std::string>& candidates, int mode) {
  for (const auto& c : candidates)
    if (is_file(c, mode))
      return c;
  return {};
}

} // namespace

outcome<install_layout> find_install_layout() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n < 0)
    return errno_failure("readlink /proc/self/exe");
  buf[n] = '\0';
  const std::string exe_dir = dirname_of(buf);
  const std::string prefix = dirname_of(exe_dir);

  install_layout out;
  if (const char* env = std::getenv("CASTELLAN_WORKER"); env && *env)
    out.worker_binary = env;
  else
    out.worker_binary = first_existing(
      {exe_dir + "/castellan-worker", prefix + "/bin/castellan-worker"}, X_OK);
  if (const char* env = std::getenv("CASTELLAN_HARNESS"); env && *env)
    out.harness = env;
  else
    out.harness = first_existing({prefix + "/share/castellan/python/castellan_harness.py",
                                  exe_dir + "/../share/castellan/python/castellan_harness.py"},
                                 R_OK);
  out.policies_dir = first_existing({prefix + "/share/castellan/policies"}, R_OK);
  out.config_file = first_existing({prefix + "/share/castellan/castellan.toml"}, R_OK);
  if (out.worker_binary.empty() || !is_file(out.worker_binary, X_OK))
    return logic_failure("castellan-worker not found beside " + std::string(buf) +
                         " (set CASTELLAN_WORKER to its path)");
  if (out.harness.empty() || !is_file(out.harness, R_OK))
    return logic_failure("castellan_harness.py not found under " + prefix +
                         "/share/castellan/python (set CASTELLAN_HARNESS to its path)");
  return out;
}

bool is_policy_name(const std::string& argument) {
  return !argument.empty() && argument.find('/') == std::string::npos &&
         (argument.size() < 5 || argument.compare(argument.size() - 5, 5, ".json") != 0);
}

std::string resolve_policy_argument(const install_layout& layout, const std::string& argument) {
  if (!is_policy_name(argument) || layout.policies_dir.empty())
    return argument;
  return layout.policies_dir + "/" + argument + ".json";
}

} // namespace castellan::platform
