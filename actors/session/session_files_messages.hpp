#pragma once

/// @file session_files_messages.hpp
/// The messages of a session's files operations (session_files.hpp): what
/// a client asks of the files of a session's workspace, and what it gets
/// back. Plain structs with `inspect()`, so they cross nodes.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/actor.hpp>
#include <caf/meta/type_name.hpp>

namespace castellan {

/// What a files_request does.
enum class files_op : uint8_t {
  stat,   ///< the entry at `path` itself (a symlink is not followed)
  list,   ///< the entries of the directory at `path`
  upload, ///< `data` becomes the file at `path` (atomically: temporary file, rename)
  remove, ///< the file, symlink or empty directory at `path` (with `recursive`: any directory)
  mkdir,  ///< the directory `path` (with `parents`: and the missing ones above it)
};

/// "stat", "list", "upload", "remove", "mkdir".
std::string to_string(files_op x);

/// One operation on the files of a session's workspace. `path` is relative
/// to /workspace or absolute under it (platform/linux/workspace_path.hpp).
struct files_request {
  files_op op = files_op::stat;
  std::string path;
  bool recursive = false;  ///< remove: a directory and all below it
  bool parents = false;    ///< mkdir, upload: make missing directories on the way
  uint32_t mode = 0644;    ///< upload: the file's permission bits
  std::string data;        ///< upload: the file's bytes
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, files_request& x) {
  return f(caf::meta::type_name("files_request"), x.op, x.path, x.recursive, x.parents, x.mode,
           x.data);
}

/// An entry of a workspace, as stat and list report it.
struct files_entry {
  std::string name;        ///< the last component ("" for /workspace)
  std::string type;        ///< file, directory, symlink, fifo, socket, char_device, block_device, other
  uint64_t size = 0;
  uint32_t mode = 0;       ///< permission bits
  int64_t mtime_ns = 0;    ///< CLOCK_REALTIME
  std::string link_target; ///< a symlink's target as stored (never followed)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, files_entry& x) {
  return f(caf::meta::type_name("files_entry"), x.name, x.type, x.size, x.mode, x.mtime_ns,
           x.link_target);
}

/// The answer to a files_request, or to the start of a download. A files
/// error is an answer, not a `caf::error`: `error` names its kind
/// (platform::files_error_code: invalid_path, escapes_workspace, not_found,
/// not_a_directory, is_a_directory, not_regular, not_empty, exists,
/// no_space, too_large, changed, permission_denied, io_error) and
/// `message` says what and where. Session-level refusals (no such session,
/// no workspace, too many transfers) are `caf::error`s.
struct files_reply {
  std::string error; ///< empty: it succeeded
  std::string message;
  std::string path;  ///< the path as the sandbox names it ("/workspace/…")
  files_entry entry; ///< stat, upload, and a download's file
  std::vector<files_entry> entries; ///< list, sorted by name
  bool truncated = false;           ///< list: more entries than it returns
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, files_reply& x) {
  return f(caf::meta::type_name("files_reply"), x.error, x.message, x.path, x.entry, x.entries,
           x.truncated);
}

/// The answer to the start of a download: the file's entry (or the error)
/// and, when it opened, the actor that reads it out chunk by chunk (a
/// files_job_actor, session_files.hpp; untyped here because that
/// interface's atoms are declared after this header).
struct download_ticket {
  files_reply head;
  caf::actor transfer; ///< null when head.error is set
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, download_ticket& x) {
  return f(caf::meta::type_name("download_ticket"), x.head, x.transfer);
}

} // namespace castellan
