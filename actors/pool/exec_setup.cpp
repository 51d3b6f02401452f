#include "actors/pool/exec_setup.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace castellan {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

bool has_files(const exec_request& req) noexcept {
  return !req.files_in.empty() || !req.files_out.empty();
}

/// The working directory the request's SETUP names.
const std::string& setup_cwd(const exec_request& req) {
  static const std::string files_dir = default_files_dir;
  return req.cwd.empty() && has_files(req) ? files_dir : req.cwd;
}

/// A request policy may narrow the exec's process: its files stay in /tmp.
bool narrowed(const exec_request& req) noexcept {
  return !req.tightening.empty() || !req.policy.empty();
}

/// `path`'s components, without empty ones and `.`; false on a `..`.
bool components_of(const std::string& path, std::vector<std::string>& out) {
  std::size_t start = 0;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string::npos)
      end = path.size();
    std::string part = path.substr(start, end - start);
    if (part == "..")
      return false;
    if (!part.empty() && part != ".")
      out.push_back(std::move(part));
    start = end + 1;
  }
  return true;
}

std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (const auto& p : parts)
    out += "/" + p;
  return out.empty() ? "/" : out;
}

/// True when `path` (resolved) is strictly below `dir` (resolved).
bool strictly_below(const std::string& path, const std::string& dir) {
  if (dir == "/")
    return path.size() > 1;
  return path.size() > dir.size() + 1 && path.compare(0, dir.size(), dir) == 0 &&
         path[dir.size()] == '/';
}

uint64_t files_block_bytes(const exec_request& req, std::vector<std::string>* resolved) {
  uint64_t n = 8;
  const std::string& cwd = setup_cwd(req);
  for (const auto& f : req.files_in) {
    std::string why;
    auto abs = resolve_file_path(f.path, cwd, narrowed(req), why);
    n += 12 + abs.size() + f.content.size();
    if (resolved)
      resolved->push_back(std::move(abs));
  }
  for (const auto& p : req.files_out) {
    std::string why;
    auto abs = resolve_file_path(p, cwd, narrowed(req), why);
    n += 4 + abs.size();
    if (resolved)
      resolved->push_back(std::move(abs));
  }
  return n;
}

} // namespace

bool has_setup(const exec_request& req) noexcept {
  return !req.env.empty() || !req.cwd.empty() || !req.stdin_data.empty() || req.output_sink ||
         has_files(req);
}

std::string resolve_file_path(const std::string& path, const std::string& cwd, bool narrow,
                              std::string& why) {
  if (path.empty()) {
    why = "the path is empty";
    return {};
  }
  if (path.find('\0') != std::string::npos) {
    why = "the path contains a NUL byte";
    return {};
  }
  if (path.size() > max_file_path_bytes) {
    why = "the path is " + std::to_string(path.size()) + " bytes; at most " +
          std::to_string(max_file_path_bytes);
    return {};
  }
  const std::string base_text = cwd.empty() ? std::string(default_files_dir) : cwd;
  std::vector<std::string> base_parts;
  if (!components_of(base_text, base_parts)) {
    why = "the working directory '" + base_text + "' has a '..' component; files need one without";
    return {};
  }
  const std::string base = joined(base_parts);
  std::vector<std::string> parts;
  if (path.front() != '/')
    parts = base_parts;
  if (!components_of(path, parts)) {
    why = "'" + path + "' has a '..' component";
    return {};
  }
  std::string out = joined(parts);
  if (out.size() > max_file_path_bytes) {
    why = "'" + path + "' is " + std::to_string(out.size()) + " bytes once resolved; at most " +
          std::to_string(max_file_path_bytes);
    return {};
  }
  if (strictly_below(out, default_files_dir) || (!narrow && strictly_below(out, base)))
    return out;
  why = "'" + path + "' is " + (path == out ? std::string() : "'" + out + "', ") +
        (narrow ? "not below /tmp (a request with a policy keeps its files there)"
                : "not below /tmp or the working directory '" + base + "'");
  return {};
}

std::string check_setup(const exec_request& req) {
  if (req.env.size() > max_env_entries)
    return "env: " + std::to_string(req.env.size()) + " variables; at most " +
           std::to_string(max_env_entries) + " may be set";
  for (std::size_t i = 0; i < req.env.size(); ++i) {
    const std::string& e = req.env[i];
    const std::string where = "env[" + std::to_string(i) + "]";
    const auto eq = e.find('=');
    if (eq == std::string::npos)
      return where + ": '" + e + "' is not NAME=VALUE";
    if (eq == 0)
      return where + ": the name is empty";
    if (e.find('\0') != std::string::npos)
      return where + ": contains a NUL byte";
  }
  if (!req.cwd.empty()) {
    if (req.cwd.front() != '/')
      return "cwd: '" + req.cwd + "' is not an absolute path";
    if (req.cwd.size() > max_cwd_bytes)
      return "cwd: " + std::to_string(req.cwd.size()) + " bytes; at most " +
             std::to_string(max_cwd_bytes);
    if (req.cwd.find('\0') != std::string::npos)
      return "cwd: contains a NUL byte";
  }
  // The frame's u32 lengths; the ring (at most 64 MiB) bounds it further.
  std::size_t env_bytes = 0;
  for (const auto& e : req.env)
    env_bytes += e.size() + 1;
  if (env_bytes > UINT32_MAX)
    return "env: " + std::to_string(env_bytes) + " bytes is too large";
  if (req.stdin_data.size() > UINT32_MAX)
    return "stdin: " + std::to_string(req.stdin_data.size()) + " bytes is too large";
  if (req.files_in.size() > max_files)
    return "files_in: " + std::to_string(req.files_in.size()) + " files; at most " +
           std::to_string(max_files);
  if (req.files_out.size() > max_files)
    return "files_out: " + std::to_string(req.files_out.size()) + " files; at most " +
           std::to_string(max_files);
  const std::string& cwd = setup_cwd(req);
  uint64_t total = 0;
  std::vector<std::string> seen;
  for (std::size_t i = 0; i < req.files_in.size(); ++i) {
    const auto& f = req.files_in[i];
    const std::string where = "files_in[" + std::to_string(i) + "]";
    std::string why;
    auto abs = resolve_file_path(f.path, cwd, narrowed(req), why);
    if (abs.empty())
      return where + ".path: " + why;
    if (std::find(seen.begin(), seen.end(), abs) != seen.end())
      return where + ".path: '" + abs + "' is written twice";
    for (const auto& other : seen)
      if (strictly_below(abs, other) || strictly_below(other, abs))
        return where + ".path: '" + abs + "' and '" + other + "' cannot both be files";
    seen.push_back(abs);
    if (f.mode > 0777)
      return where + ".mode: " + std::to_string(f.mode) + " is not permission bits (0 to 0777)";
    if (f.content.size() > max_file_bytes)
      return where + ".content: " + std::to_string(f.content.size()) +
             " bytes; a file may have at most " + std::to_string(max_file_bytes);
    total += f.content.size();
    if (total > max_files_total_bytes)
      return where + ".content: the files come to " + std::to_string(total) +
             " bytes; together they may have at most " + std::to_string(max_files_total_bytes);
  }
  for (std::size_t i = 0; i < req.files_out.size(); ++i) {
    std::string why;
    if (resolve_file_path(req.files_out[i], cwd, narrowed(req), why).empty())
      return "files_out[" + std::to_string(i) + "]: " + why;
  }
  return {};
}

uint64_t setup_bytes(const exec_request& req) noexcept {
  if (!has_setup(req))
    return 0;
  uint64_t n = setup_header_bytes + setup_cwd(req).size() + req.stdin_data.size();
  for (const auto& e : req.env)
    n += e.size() + 1;
  if (has_files(req))
    n += 4 + files_block_bytes(req, nullptr);
  return n;
}

std::string encode_setup(const exec_request& req) {
  std::size_t env_bytes = 0;
  for (const auto& e : req.env)
    env_bytes += e.size() + 1;
  const std::string& cwd = setup_cwd(req);
  const bool files = has_files(req);
  std::vector<std::string> resolved;
  const uint64_t files_bytes = files ? files_block_bytes(req, &resolved) : 0;
  std::string out;
  out.reserve(static_cast<std::size_t>(setup_bytes(req)));
  put_u32(out, static_cast<uint32_t>(cwd.size()));
  put_u32(out, static_cast<uint32_t>(env_bytes));
  put_u32(out, static_cast<uint32_t>(req.stdin_data.size()));
  put_u32(out, (req.output_sink ? setup_stream_output : 0u) | (files ? setup_files : 0u));
  if (files)
    put_u32(out, static_cast<uint32_t>(files_bytes));
  out += cwd;
  for (const auto& e : req.env) {
    out += e;
    out.push_back('\0');
  }
  out += req.stdin_data;
  if (files) {
    put_u32(out, static_cast<uint32_t>(req.files_in.size()));
    put_u32(out, static_cast<uint32_t>(req.files_out.size()));
    std::size_t k = 0;
    for (const auto& f : req.files_in) {
      const auto& path = resolved[k++];
      put_u32(out, static_cast<uint32_t>(path.size()));
      put_u32(out, f.mode);
      put_u32(out, static_cast<uint32_t>(f.content.size()));
      out += path;
      out += f.content;
    }
    for (std::size_t i = 0; i < req.files_out.size(); ++i) {
      const auto& path = resolved[k++];
      put_u32(out, static_cast<uint32_t>(path.size()));
      out += path;
    }
  }
  return out;
}

} // namespace castellan
