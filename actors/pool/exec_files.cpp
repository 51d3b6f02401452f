#include "actors/pool/exec_files.hpp"

#include <cstring>

#include "actors/pool/exec_setup.hpp"

namespace castellan {

namespace {

uint64_t get_le(std::string_view bytes, std::size_t offset, std::size_t width) {
  uint64_t v = 0;
  for (std::size_t i = 0; i < width; ++i)
    v |= uint64_t{static_cast<unsigned char>(bytes[offset + i])} << (8 * i);
  return v;
}

void put_le(std::string& out, uint64_t v, std::size_t width) {
  for (std::size_t i = 0; i < width; ++i)
    out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

} // namespace

std::string encode_file_frame(uint32_t index, file_status status, uint64_t size,
                              std::string_view data) {
  std::string out;
  out.reserve(file_frame_header_bytes + data.size());
  put_le(out, index, 4);
  out.push_back(static_cast<char>(status));
  put_le(out, size, 8);
  out.append(data.data(), data.size());
  return out;
}

void file_collector::prepare(const std::vector<std::string>& paths,
                             std::vector<exec_file_out>& files) {
  files.clear();
  files.reserve(paths.size());
  for (const auto& p : paths) {
    exec_file_out f;
    f.path = p;
    f.error = "not_collected";
    f.message = "the exec did not reach the point where its files are read";
    files.push_back(std::move(f));
  }
}

outcome<void> file_collector::take(std::string_view payload, std::vector<exec_file_out>& files) {
  if (payload.size() < file_frame_header_bytes)
    return logic_failure("FILE payload of " + std::to_string(payload.size()) +
                         " bytes is shorter than its header");
  const auto index = static_cast<uint32_t>(get_le(payload, 0, 4));
  const auto status = static_cast<uint8_t>(payload[4]);
  const uint64_t size = get_le(payload, 5, 8);
  const std::string_view data = payload.substr(file_frame_header_bytes);
  const std::string where = "FILE " + std::to_string(index);
  if (index >= files.size())
    return logic_failure(where + ": the request asked for " + std::to_string(files.size()) +
                         " files");
  if (remaining_ > 0) {
    // The rest of the open entry: same index, same header, more bytes.
    if (index != open_ || status != static_cast<uint8_t>(file_status::content) ||
        size != files[open_].size)
      return logic_failure(where + " while file " + std::to_string(open_) + " has " +
                           std::to_string(remaining_) + " bytes to come");
    if (data.empty() || data.size() > remaining_)
      return logic_failure(where + ": " + std::to_string(data.size()) + " bytes where " +
                           std::to_string(remaining_) + " remain");
    files[index].content.append(data.data(), data.size());
    remaining_ -= data.size();
    return {};
  }
  if (index < next_)
    return logic_failure(where + " after file " + std::to_string(next_ - 1));
  next_ = index + 1;
  auto& f = files[index];
  f.content.clear();
  f.size = 0;
  switch (static_cast<file_status>(status)) {
    case file_status::content:
      if (size > max_file_bytes)
        return logic_failure(where + ": " + std::to_string(size) + " bytes is over the limit of " +
                             std::to_string(max_file_bytes));
      if (announced_ + size > max_files_total_bytes)
        return logic_failure(where + ": the files come to " + std::to_string(announced_ + size) +
                             " bytes, over the limit of " + std::to_string(max_files_total_bytes));
      if (data.size() > size)
        return logic_failure(where + ": " + std::to_string(data.size()) + " bytes of a file of " +
                             std::to_string(size));
      announced_ += size;
      f.size = size;
      f.error.clear();
      f.message.clear();
      f.content.assign(data.data(), data.size());
      open_ = index;
      remaining_ = size - data.size();
      return {};
    case file_status::missing:
    case file_status::not_regular:
    case file_status::too_large:
    case file_status::unreadable:
    case file_status::over_total:
      break;
    default:
      return logic_failure(where + ": unknown status " + std::to_string(status));
  }
  if (!data.empty())
    return logic_failure(where + ": data with status " + std::to_string(status));
  switch (static_cast<file_status>(status)) {
    case file_status::missing:
      f.error = "missing";
      f.message = "no such file";
      break;
    case file_status::not_regular:
      f.error = "not_regular";
      f.message = "not a regular file (a directory, symlink, FIFO, socket or device, or a file "
                  "of /proc or /sys): not read";
      break;
    case file_status::too_large:
      f.error = "too_large";
      f.size = size;
      f.message = std::to_string(size) + " bytes; a file brought back may have at most " +
                  std::to_string(max_file_bytes);
      break;
    case file_status::over_total:
      f.error = "too_large";
      f.size = size;
      f.message = "the files before it used up the " + std::to_string(max_files_total_bytes) +
                  " bytes the files brought back may have together";
      break;
    default: { // unreadable: the size field carries the errno
      if (size == 0 || size > 4095)
        return logic_failure(where + ": errno " + std::to_string(size) + " out of range");
      f.error = "unreadable";
      f.message = std::string("cannot read it: ") + std::strerror(static_cast<int>(size));
      break;
    }
  }
  return {};
}

outcome<void> file_collector::finish() const {
  if (remaining_ > 0)
    return logic_failure("RESULT while file " + std::to_string(open_) + " has " +
                         std::to_string(remaining_) + " bytes to come");
  return {};
}

void file_collector::abandon(std::vector<exec_file_out>& files) {
  if (remaining_ == 0 || open_ >= files.size())
    return;
  auto& f = files[open_];
  f.content.clear();
  f.content.shrink_to_fit();
  f.size = 0;
  f.error = "not_collected";
  f.message = "the exec ended while the file was being sent back: only part of it came";
  remaining_ = 0;
}

} // namespace castellan
