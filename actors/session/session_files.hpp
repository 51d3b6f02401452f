#pragma once

/// @file session_files.hpp
/// The files of a session's workspace, from the host: stat, list, upload,
/// download, remove, mkdir (session_files_messages.hpp). The file system
/// work is platform/linux/workspace_{path,files,transfer}.hpp, which
/// resolves every path beneath the workspace's root fd and never follows a
/// link out of it.
///
/// Where the blocking I/O runs: each operation is a detached actor of its
/// own (a thread for as long as it lives), spawned by the session, which
/// delegates the client's request to it and goes on with its own messages.
/// Neither the session's nor the supervisor's loop, nor a scheduler
/// thread, ever waits on the disk: a 100 MiB upload, a slow disk or a full
/// quota hold up that one operation only, and an exec runs meanwhile. A
/// session runs at most max_files_jobs of them at once (one more is
/// answered `busy`), so a client cannot make the daemon start threads
/// without bound. A download's actor lives while its client reads: it
/// answers one chunk per `files_read_atom` (the reader paces it; no chunk
/// is read ahead of demand) and quits after the last one, on an error, or
/// after files_idle_timeout without a read.

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>

#include <caf/actor_system.hpp>
#include <caf/replies_to.hpp>
#include <caf/typed_actor.hpp>

#include "actors/messages.hpp"
#include "ipc/outcome.hpp"
#include "ipc/unique_fd.hpp"
#include "platform/linux/workspace_volume.hpp"

namespace castellan {

/// Operations of one session at once.
inline constexpr std::size_t max_files_jobs = 4;
/// A download's chunk.
inline constexpr std::size_t files_chunk_bytes = 1u << 20;
/// The largest upload a files_request may carry.
inline constexpr uint64_t max_upload_bytes = 1ull << 30;
/// A download nobody reads for this long is dropped (its file closed).
inline constexpr std::chrono::seconds files_idle_timeout{60};

/// A session's workspace as its files operations reach it: the directory
/// fd (O_PATH) of its mount's root that the session's lease holds
/// (workspace_lease::root(), the same the sandbox binds: no path is
/// resolved again), and the host ids the sandbox's user maps to, which own
/// what an upload makes (so code in the sandbox can change or remove it).
struct files_root {
  std::shared_ptr<const unique_fd> root;
  platform::volume_owner owner;
  std::string name; ///< the workspace's name, for messages

  int fd() const noexcept { return root ? root->get() : -1; }
};

/// The files root of a session's workspace `name`, from its lease's fd;
/// a failure when the kernel lacks openat2's resolve flags.
outcome<std::shared_ptr<const files_root>> open_files_root(std::shared_ptr<const unique_fd> root,
                                                          const std::string& name);

/// One files operation, on a thread of its own: what the session delegates
/// `files_atom` and `files_download_atom` to.
using files_job_actor = caf::typed_actor<
  // Runs the operation, answers, and quits.
  caf::replies_to<files_atom, files_request>::with<files_reply>,
  // Opens the file for a download: the reply's `head` has its entry (size,
  // mode, mtime) or the error; on success `transfer` is this actor, which
  // then answers files_read_atom.
  caf::replies_to<files_download_atom, std::string>::with<download_ticket>,
  // The next chunk (at most files_chunk_bytes); empty once the whole file
  // was read, and the actor quits. An error (io_failed, with the files
  // error code first in its message) when the file shrank or could not
  // be read: a download is never cut short silently.
  caf::replies_to<files_read_atom>::with<std::string>>;

/// Spawns the detached actor of one operation on `root`.
files_job_actor spawn_files_job(caf::actor_system& sys, std::shared_ptr<const files_root> root);

} // namespace castellan
