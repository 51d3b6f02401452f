#include "apps/castellan/file_transfer.hpp"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iostream>
#include <sstream>

namespace castellan::cli {

namespace {

/// The last component of `path` ("" for "dir/").
std::string last_component(const std::string& path) {
  const auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// `spec` split at its first ':' (second part empty without one).
std::pair<std::string, std::string> split_spec(const std::string& spec) {
  const auto colon = spec.find(':');
  if (colon == std::string::npos)
    return {spec, {}};
  return {spec.substr(0, colon), spec.substr(colon + 1)};
}

} // namespace

bool add_files_in(const std::vector<std::string>& specs, exec_request& req) {
  for (const auto& spec : specs) {
    auto [local, path] = split_spec(spec);
    if (path.empty())
      path = last_component(local);
    if (local.empty() || path.empty()) {
      std::cerr << "castellan: --file-in '" << spec << "': expected LOCAL[:PATH]\n";
      return false;
    }
    std::ifstream in(local, std::ios::binary);
    struct stat st {};
    if (!in || ::stat(local.c_str(), &st) != 0) {
      std::cerr << "castellan: --file-in: cannot open '" << local << "': " << std::strerror(errno)
                << "\n";
      return false;
    }
    std::ostringstream ss;
    ss << in.rdbuf();
    if (in.bad()) {
      std::cerr << "castellan: --file-in: cannot read '" << local << "'\n";
      return false;
    }
    exec_file_in f;
    f.path = std::move(path);
    f.content = ss.str();
    f.mode = st.st_mode & 0777;
    req.files_in.push_back(std::move(f));
  }
  return true;
}

bool add_files_out(const std::vector<std::string>& specs, exec_request& req,
                   std::vector<std::string>& locals) {
  for (const auto& spec : specs) {
    auto [path, local] = split_spec(spec);
    if (local.empty())
      local = last_component(path);
    if (path.empty() || local.empty()) {
      std::cerr << "castellan: --file-out '" << spec << "': expected PATH[:LOCAL]\n";
      return false;
    }
    req.files_out.push_back(std::move(path));
    locals.push_back(std::move(local));
  }
  return true;
}

bool save_files_out(const exec_result& r, const std::vector<std::string>& locals) {
  bool all = true;
  for (std::size_t i = 0; i < locals.size(); ++i) {
    if (i >= r.files.size()) {
      std::cerr << "castellan: --file-out: the result has no file " << i << "\n";
      all = false;
      continue;
    }
    const auto& f = r.files[i];
    if (!f.error.empty()) {
      std::cerr << "castellan: --file-out " << f.path << ": " << f.error << ": " << f.message
                << "\n";
      all = false;
      continue;
    }
    std::ofstream out(locals[i], std::ios::binary | std::ios::trunc);
    out.write(f.content.data(), static_cast<std::streamsize>(f.content.size()));
    out.close();
    if (!out) {
      std::cerr << "castellan: --file-out " << f.path << ": cannot write '" << locals[i]
                << "': " << std::strerror(errno) << "\n";
      all = false;
    }
  }
  return all;
}

} // namespace castellan::cli
