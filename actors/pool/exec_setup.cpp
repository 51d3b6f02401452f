#include "actors/pool/exec_setup.hpp"

#include <cstdint>

namespace castellan {

namespace {

void put_u32(std::string& out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

} // namespace

bool has_setup(const exec_request& req) noexcept {
  return !req.env.empty() || !req.cwd.empty() || !req.stdin_data.empty() || req.output_sink;
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
  return {};
}

std::string encode_setup(const exec_request& req) {
  std::size_t env_bytes = 0;
  for (const auto& e : req.env)
    env_bytes += e.size() + 1;
  std::string out;
  out.reserve(setup_header_bytes + req.cwd.size() + env_bytes + req.stdin_data.size());
  put_u32(out, static_cast<uint32_t>(req.cwd.size()));
  put_u32(out, static_cast<uint32_t>(env_bytes));
  put_u32(out, static_cast<uint32_t>(req.stdin_data.size()));
  put_u32(out, req.output_sink ? setup_stream_output : 0u);
  out += req.cwd;
  for (const auto& e : req.env) {
    out += e;
    out.push_back('\0');
  }
  out += req.stdin_data;
  return out;
}

} // namespace castellan
