#pragma once

/// @file workspace_transfer.hpp
/// Uploads into and downloads from a workspace, in chunks, from the host
/// while a hostile sandbox uses the same tree (workspace_path.hpp says how
/// paths are resolved). Both are blocking file I/O: run them off any actor's
/// message loop (actors/session/session_files.hpp does).
///
/// An upload is written to a hidden temporary file in the target's
/// directory (".castellan-upload-<random>", through that directory's fd),
/// synced, given its mode and the sandbox's host ids, and renamed over the
/// target: a reader in the sandbox, or a daemon killed midway, sees the old
/// file or the new one, never half of one. A kill of the daemon can leave
/// the temporary file behind (it is never the target).

#include <cstdint>
#include <string>
#include <string_view>

#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/workspace_files.hpp"

namespace castellan::platform {

struct upload_options {
  volume_owner owner;          ///< the file's (and new directories') host ids
  uint32_t mode = 0644;        ///< permission bits of the file (07777 at most)
  uint64_t max_bytes = 1ull << 30; ///< more is refused (EFBIG), the temporary file removed
  bool make_parents = false;   ///< make missing directories on the way (0755, owner)
};

/// One upload in progress. Destroyed before commit(): the temporary file is
/// removed and the target is as it was.
class workspace_upload {
public:
  /// Resolves the target's directory and creates the temporary file in it.
  /// The target need not exist; an existing directory there is refused
  /// (EISDIR) at once.
  static outcome<workspace_upload> begin(int root_fd, const workspace_path& path,
                                         const upload_options& opts);

  workspace_upload(workspace_upload&&) noexcept = default;
  workspace_upload& operator=(workspace_upload&&) noexcept = default;
  ~workspace_upload();

  /// Appends `bytes`. ENOSPC or EDQUOT (the workspace's quota) and EFBIG
  /// (opts.max_bytes) fail; the caller then drops the upload.
  outcome<void> write(std::string_view bytes);

  /// Syncs, sets the mode and owner, renames the file over the target, and
  /// checks that the entry now at the target is the file written (the
  /// sandbox may rename or replace the temporary file meanwhile: ESTALE,
  /// and what it put there stays). Returns the new entry.
  outcome<workspace_entry> commit();

  uint64_t written() const noexcept { return written_; }

private:
  workspace_upload() = default;
  void discard() noexcept;

  workspace_path path_;
  unique_fd dir_;  ///< the target's directory
  unique_fd file_; ///< the temporary file, written through this fd only
  std::string name_;
  std::string temp_name_;
  upload_options opts_;
  uint64_t written_ = 0;
  bool done_ = false;
};

/// One download in progress: the file is opened once, and every chunk is
/// read from that open file.
class workspace_download {
public:
  /// Opens the regular file at `path` (symlinks followed only while they
  /// stay inside). Anything else is refused without being opened for
  /// reading: a directory (EISDIR), a FIFO, socket or device (ENXIO). A
  /// file over `max_bytes` is refused (EFBIG).
  static outcome<workspace_download> open(int root_fd, const workspace_path& path,
                                          uint64_t max_bytes = UINT64_MAX);

  /// The size when it was opened: what the download delivers.
  uint64_t size() const noexcept { return size_; }
  /// The file's mode bits and mtime when it was opened.
  const workspace_entry& entry() const noexcept { return entry_; }

  /// The next chunk, at most `max` bytes; empty once size() bytes were
  /// read. A file that shrank meanwhile fails (ESTALE): a download is
  /// never cut short without an error.
  outcome<std::string> read(std::size_t max);

  bool done() const noexcept { return offset_ >= size_; }

private:
  workspace_download() = default;
  workspace_path path_;
  unique_fd file_;
  uint64_t size_ = 0;
  uint64_t offset_ = 0;
  workspace_entry entry_;
};

} // namespace castellan::platform
