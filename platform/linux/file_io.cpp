#include "platform/linux/file_io.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>

#include "ipc/unique_fd.hpp"

namespace castellan::platform {

outcome<std::string> read_text_file(const std::string& path, std::size_t max_bytes) {
  unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd)
    return errno_failure("open " + path);
  std::string out;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fd.get(), buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_failure("read " + path);
    }
    if (n == 0)
      break;
    out.append(buf, static_cast<std::size_t>(n));
    if (out.size() > max_bytes)
      return logic_failure("read " + path + ": larger than " + std::to_string(max_bytes) +
                           " bytes");
  }
  return out;
}

outcome<void> write_text_file(const std::string& path, std::string_view content) {
  unique_fd fd(::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY));
  if (!fd)
    return errno_failure("open " + path + " for writing");
  ssize_t n;
  do {
    n = ::write(fd.get(), content.data(), content.size());
  } while (n < 0 && errno == EINTR);
  if (n < 0)
    return errno_failure("write '" + std::string(content) + "' to " + path);
  if (static_cast<std::size_t>(n) != content.size())
    return logic_failure("write '" + std::string(content) + "' to " + path + ": short write");
  return {};
}

std::optional<uint64_t> parse_u64(std::string_view text) noexcept {
  std::size_t i = 0;
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
    ++i;
  if (i == text.size() || !std::isdigit(static_cast<unsigned char>(text[i])))
    return std::nullopt;
  uint64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const auto digit = static_cast<uint64_t>(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return std::nullopt;
    value = value * 10 + digit;
  }
  while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i])))
    ++i;
  if (i != text.size())
    return std::nullopt;
  return value;
}

std::optional<uint64_t> keyed_value(std::string_view text, std::string_view key) noexcept {
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (line.size() > key.size() && line.substr(0, key.size()) == key &&
        line[key.size()] == ' ')
      return parse_u64(line.substr(key.size() + 1));
    pos = end + 1;
  }
  return std::nullopt;
}

bool path_exists(const std::string& path) noexcept {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0;
}

} // namespace castellan::platform
