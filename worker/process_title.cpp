/// @file process_title.cpp
/// Renaming a launched process (process_title.hpp).

#include "worker/process_title.hpp"

#include <sys/prctl.h>

#include <cstring>

namespace castellan::worker {

namespace {

/// The launcher's argv strings: contiguous, from argv[0] to the end of the
/// last one. Per process by nature (it is this process's command line).
char* area = nullptr;
std::size_t area_len = 0;

} // namespace

void remember_title_area(int argc, char** argv) noexcept {
  if (argc < 1 || argv[0] == nullptr)
    return;
  char* end = argv[0] + std::strlen(argv[0]) + 1;
  for (int i = 1; i < argc && argv[i] == end; ++i) // only the contiguous run
    end = argv[i] + std::strlen(argv[i]) + 1;
  area = argv[0];
  area_len = static_cast<std::size_t>(end - argv[0]);
}

void set_process_title(const std::vector<std::string>& args) noexcept {
  if (area == nullptr || args.empty())
    return;
  std::memset(area, 0, area_len);
  std::size_t at = 0;
  for (const auto& a : args) {
    if (at + a.size() + 1 > area_len)
      break; // what does not fit is left out, never a partial argument
    std::memcpy(area + at, a.data(), a.size());
    at += a.size() + 1;
  }
  const std::string& exe = args.front();
  const auto slash = exe.find_last_of('/');
  const std::string comm = exe.substr(slash == std::string::npos ? 0 : slash + 1, 15);
  ::prctl(PR_SET_NAME, comm.c_str(), 0, 0, 0);
}

} // namespace castellan::worker
