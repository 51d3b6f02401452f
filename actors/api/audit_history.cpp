#include "actors/api/audit_history.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <utility>

namespace castellan::api {

audit_history audit_history::open(const std::string& path, uint32_t max_files) {
  audit_history h;
  std::set<std::pair<dev_t, ino_t>> seen;
  std::vector<unique_fd> newest_first;
  for (uint32_t i = 0; i <= max_files; ++i) {
    const std::string name = i == 0 ? path : path + "." + std::to_string(i);
    unique_fd fd(::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
    if (!fd) {
      if (errno != ENOENT && h.error_.empty())
        h.error_ = name + ": " + std::strerror(errno);
      continue;
    }
    struct stat st {};
    if (::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode))
      continue;
    if (!seen.emplace(st.st_dev, st.st_ino).second)
      continue; // rotated between two opens: already open under its old name
    newest_first.push_back(std::move(fd));
  }
  std::reverse(newest_first.begin(), newest_first.end());
  h.files_ = std::move(newest_first);
  return h;
}

bool audit_history::next(std::string& line) {
  for (;;) {
    const auto nl = buf_.find('\n', start_);
    if (nl != std::string::npos) {
      line.assign(buf_, start_, nl - start_);
      start_ = nl + 1;
      return true;
    }
    if (current_ >= files_.size())
      return false;
    buf_.erase(0, start_);
    start_ = 0;
    char chunk[65536];
    const auto n = ::read(files_[current_].get(), chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR)
      continue;
    if (n > 0) {
      buf_.append(chunk, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && error_.empty())
      error_ = std::string("read: ") + std::strerror(errno);
    // The end of this file: a partial last line is a record being written
    // (it comes live) or a torn one; either way not history.
    buf_.clear();
    ++current_;
  }
}

} // namespace castellan::api
