#include "config/regular_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "config/byte_size.hpp"

namespace castellan::config {

namespace {

/// Closes the descriptor it holds.
struct fd_closer {
  int fd;
  ~fd_closer() {
    if (fd >= 0)
      ::close(fd);
  }
};

} // namespace

regular_file_text read_regular_file(const std::string& path, std::size_t max_bytes,
                                    bool owner_only) {
  regular_file_text out;
  // O_NONBLOCK: opening a FIFO without a writer returns at once; on a
  // regular file it changes nothing.
  const fd_closer f{::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK)};
  if (f.fd < 0) {
    out.error = std::string("cannot read: ") + std::strerror(errno);
    return out;
  }
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) {
    out.error = std::string("cannot read: ") + std::strerror(errno);
    return out;
  }
  if (!S_ISREG(st.st_mode)) {
    out.error = "not a regular file";
    return out;
  }
  if (owner_only && (st.st_mode & (S_IRWXG | S_IRWXO)) != 0) {
    char mode[8];
    std::snprintf(mode, sizeof mode, "%04o", static_cast<unsigned>(st.st_mode & 07777));
    out.error = std::string("mode ") + mode + " lets others than its owner use it (chmod 600)";
    return out;
  }
  // One byte more than allowed tells a file that is too large.
  out.text.resize(max_bytes + 1);
  std::size_t got = 0;
  while (got < out.text.size()) {
    const ssize_t n = ::read(f.fd, out.text.data() + got, out.text.size() - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      out.error = std::string("cannot read: ") + std::strerror(errno);
      out.text.clear();
      return out;
    }
    if (n == 0)
      break;
    got += static_cast<std::size_t>(n);
  }
  out.text.resize(got);
  if (got > max_bytes) {
    out.error = "larger than " + format_byte_size(max_bytes);
    out.text.clear();
  }
  return out;
}

} // namespace castellan::config
