#pragma once

/// @file audit_history.hpp
/// Reads back what the audit file sink holds (docs/audit.md, "Rotation"):
/// `path.max_files` … `path.1`, then `path`, oldest first, line by line. No
/// CAF.

#include <cstdint>
#include <string>
#include <vector>

#include "ipc/unique_fd.hpp"

namespace castellan::api {

class audit_history {
public:
  /// Opens `path` and then the rotated files that exist. `path` first: a
  /// rotation between the opens then shows up as a file opened twice (the
  /// same inode, skipped), never as a file missed; one rotation more than
  /// `max_files` between the opens can still cost the oldest file.
  static audit_history open(const std::string& path, uint32_t max_files);

  /// The next complete line (without its newline), oldest first; false at
  /// the end. A last line without a newline (a record being written) is
  /// left out: it arrives live.
  bool next(std::string& line);

  /// Why a file could not be read ("" if none failed); a missing file is
  /// no failure.
  const std::string& error() const { return error_; }

private:
  std::vector<unique_fd> files_; ///< oldest first
  std::size_t current_ = 0;
  std::string buf_;
  std::size_t start_ = 0; ///< of the next line in buf_
  std::string error_;
};

} // namespace castellan::api
