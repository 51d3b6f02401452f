#pragma once

/// @file exec_files.hpp
/// The files an exec asked back (exec_request::files_out), as the worker
/// sends them in FILE frames (docs/wire.md): each frame checked as hostile
/// input (index, order, sizes, the per-file and total limits) before it is
/// taken into the result.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "actors/exec_messages.hpp"
#include "ipc/outcome.hpp"

namespace castellan {

/// A FILE frame's fixed part: u32 index, u8 status, u64 size.
inline constexpr std::size_t file_frame_header_bytes = 13;

/// A FILE frame's status byte.
enum class file_status : uint8_t {
  content = 0,     ///< the file's bytes follow (size: the whole file)
  missing = 1,     ///< no such file (or a directory on the way is missing)
  not_regular = 2, ///< a directory, symlink, FIFO, socket, device, or on /proc or /sys
  too_large = 3,   ///< over max_file_bytes (size: the file's size)
  unreadable = 4,  ///< opening or reading failed (size: the errno)
  over_total = 5,  ///< the files before it used up max_files_total_bytes (size: its size)
};

/// The FILE frame's payload: header, then `data` (docs/wire.md).
std::string encode_file_frame(uint32_t index, file_status status, uint64_t size,
                              std::string_view data);

/// Takes one exec's FILE frames into its result's `files`.
class file_collector {
public:
  /// Every path of `paths` gets an entry in `files`, "not_collected" until
  /// its frames arrive.
  static void prepare(const std::vector<std::string>& paths, std::vector<exec_file_out>& files);

  /// Takes one FILE frame's payload. A failure is a protocol violation: an
  /// index out of range or out of order, data where none may be, more bytes
  /// than announced, a size over the limits, an unknown status.
  outcome<void> take(std::string_view payload, std::vector<exec_file_out>& files);

  /// At the RESULT: a failure when a file's bytes are still missing.
  outcome<void> finish() const;

  /// When the exec is answered without its RESULT (a deadline, a cancel, a
  /// protocol violation, a lost worker): the file whose bytes were still
  /// coming is "not_collected", not a truncated file passed off as whole.
  void abandon(std::vector<exec_file_out>& files);

private:
  uint32_t next_ = 0;         ///< the lowest index a new entry may have
  uint32_t open_ = 0;         ///< the entry still receiving bytes (when remaining_ > 0)
  uint64_t remaining_ = 0;    ///< bytes it still has to receive
  uint64_t announced_ = 0;    ///< the sizes of all content entries so far
};

} // namespace castellan
