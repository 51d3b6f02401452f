#pragma once

/// @file regular_file.hpp
/// Reading a config file (castellan.toml, the tokens file) so that what is
/// checked is what is read: the file is opened once, without waiting (a
/// FIFO put in its place would otherwise hold the reader, the daemon's
/// signal thread on SIGHUP, until some writer came), and its type and mode
/// are checked on that descriptor, not on a path another process can swap.

#include <cstddef>
#include <string>

namespace castellan::config {

/// A file's text, or why it was not read.
struct regular_file_text {
  std::string text;
  std::string error; ///< empty: `text` is the whole file
};

/// Reads the regular file `path` (symbolic links followed), at most
/// `max_bytes` of it. Refused: anything but a regular file, one larger than
/// `max_bytes`, and with `owner_only` one whose mode gives its group or
/// others any access.
regular_file_text read_regular_file(const std::string& path, std::size_t max_bytes,
                                    bool owner_only);

} // namespace castellan::config
