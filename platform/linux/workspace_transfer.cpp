#include "platform/linux/workspace_transfer.hpp"

#include <fcntl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

namespace castellan::platform {

namespace {

std::string random_suffix() {
  unsigned char raw[8] = {};
  if (::getrandom(raw, sizeof raw, 0) != static_cast<ssize_t>(sizeof raw)) {
    // Not secret, only unique: O_EXCL catches a collision anyway.
    static unsigned counter = 0;
    const auto v = static_cast<unsigned>(::getpid()) * 2654435761u + ++counter;
    for (std::size_t i = 0; i < sizeof raw; ++i)
      raw[i] = static_cast<unsigned char>(v >> ((i % 4) * 8));
  }
  std::string out;
  char hex[3];
  for (auto b : raw) {
    std::snprintf(hex, sizeof hex, "%02x", b);
    out += hex;
  }
  return out;
}

failure space_failure(int err, const workspace_path& path) {
  if (err == ENOSPC || err == EDQUOT)
    return failure{err, path.display() + ": the workspace is full (its quota is reached); "
                                         "the file was left as it was"};
  return failure{err, path.display() + ": write"};
}

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

} // namespace

outcome<workspace_upload> workspace_upload::begin(int root_fd, const workspace_path& path,
                                                  const upload_options& opts) {
  if (path.is_root())
    return failure{EISDIR, "/workspace is a directory: name a file below it"};
  if ((opts.mode & ~07777u) != 0)
    return failure{EINVAL, path.display() + ": mode " + std::to_string(opts.mode) +
                             " is not permission bits"};
  workspace_upload up;
  up.path_ = path;
  up.opts_ = opts;
  up.name_ = path.parts.back();
  workspace_path parent{std::vector<std::string>(path.parts.begin(), path.parts.end() - 1)};
  // The directory is opened once; the temporary file, the rename and the
  // check after it all go through this fd. If the sandbox renames the
  // directory, or puts a symlink where it was, the upload still lands in
  // this directory, which is inside the workspace whatever its name is now
  // (a rename cannot move it to another file system, and the workspace is
  // one, or one bind mount, of its own).
  if (opts.make_parents) {
    auto dir = make_directories(root_fd, parent, opts.owner);
    if (!dir)
      return dir.error();
    up.dir_ = std::move(*dir);
  } else {
    auto dir = open_beneath(root_fd, parent, O_RDONLY | O_DIRECTORY);
    if (!dir)
      return failure{dir.error().code, path.display() + ": its directory " + dir.error().message};
    up.dir_ = std::move(*dir);
  }
  struct stat st{};
  if (::fstatat(up.dir_.get(), up.name_.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 &&
      S_ISDIR(st.st_mode))
    return failure{EISDIR, path.display() + ": is a directory"};
  for (int attempt = 0; attempt < 4 && !up.file_; ++attempt) {
    up.temp_name_ = ".castellan-upload-" + random_suffix();
    // O_CREAT | O_EXCL never follows a symlink and never opens an existing
    // file: a name the sandbox guessed and planted is an error, not a target.
    up.file_.reset(::openat(up.dir_.get(), up.temp_name_.c_str(),
                            O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (!up.file_ && errno != EEXIST)
      return errno_failure(path.display() + ": create a temporary file beside it");
  }
  if (!up.file_)
    return errno_failure(path.display() + ": create a temporary file beside it", EEXIST);
  return up;
}

workspace_upload::~workspace_upload() { discard(); }

void workspace_upload::discard() noexcept {
  if (done_ || !file_ || !dir_)
    return;
  done_ = true;
  // Remove the temporary name only while it is still our file: the sandbox
  // may have renamed it away and put something of its own under the name.
  struct stat mine{}, there{};
  if (::fstat(file_.get(), &mine) == 0 &&
      ::fstatat(dir_.get(), temp_name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) == 0 &&
      same_file(mine, there))
    ::unlinkat(dir_.get(), temp_name_.c_str(), 0);
  file_.reset();
}

outcome<void> workspace_upload::write(std::string_view bytes) {
  if (done_ || !file_)
    return logic_failure(path_.display() + ": the upload is over");
  if (bytes.size() > opts_.max_bytes - written_) {
    discard();
    return failure{EFBIG, path_.display() + ": more than " + std::to_string(opts_.max_bytes) +
                            " bytes; the file was left as it was"};
  }
  while (!bytes.empty()) {
    const ssize_t n = ::write(file_.get(), bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR)
        continue;
      const int err = errno;
      discard();
      return space_failure(err, path_);
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
    written_ += static_cast<uint64_t>(n);
  }
  return outcome<void>{};
}

outcome<workspace_entry> workspace_upload::commit() {
  if (done_ || !file_)
    return logic_failure(path_.display() + ": the upload is over");
  // ext4 allocates at writeback: the quota can still say no here.
  if (::fsync(file_.get()) != 0) {
    const int err = errno;
    discard();
    return space_failure(err, path_);
  }
  if (::fchmod(file_.get(), opts_.mode) != 0 ||
      ::fchown(file_.get(), opts_.owner.uid, opts_.owner.gid) != 0) {
    const int err = errno;
    discard();
    return errno_failure(path_.display() + ": set its mode and owner", err);
  }
  struct stat mine{};
  if (::fstat(file_.get(), &mine) != 0) {
    const int err = errno;
    discard();
    return errno_failure(path_.display() + ": fstat", err);
  }
  // Both names are names of the one directory fd: the rename replaces the
  // entry at the target (a file, a symlink, a FIFO: the entry, never what
  // a symlink points to; a hard link's other names keep the old content).
  if (::renameat(dir_.get(), temp_name_.c_str(), dir_.get(), name_.c_str()) != 0) {
    const int err = errno;
    discard();
    if (err == ENOENT)
      return failure{tree_changed_errno,
                     path_.display() + ": its temporary file was moved away during the upload"};
    if (err == EISDIR || err == ENOTEMPTY || err == EEXIST)
      return failure{EISDIR, path_.display() + ": is a directory"};
    return errno_failure(path_.display() + ": rename into place", err);
  }
  done_ = true;
  (void)::fsync(dir_.get());
  struct stat there{};
  if (::fstatat(dir_.get(), name_.c_str(), &there, AT_SYMLINK_NOFOLLOW) != 0 ||
      !same_file(mine, there))
    return failure{tree_changed_errno,
                   path_.display() + ": replaced during the upload (its temporary file was "
                                     "renamed or swapped); what is there is not what was sent"};
  workspace_entry e;
  e.name = name_;
  e.type = entry_type::file;
  e.size = static_cast<uint64_t>(there.st_size);
  e.mode = static_cast<uint32_t>(there.st_mode & 07777);
  e.mtime_ns = static_cast<int64_t>(there.st_mtim.tv_sec) * 1000000000 + there.st_mtim.tv_nsec;
  file_.reset();
  return e;
}

outcome<workspace_download> workspace_download::open(int root_fd, const workspace_path& path,
                                                     uint64_t max_bytes) {
  // First an O_PATH fd: it opens nothing for reading, so a FIFO cannot
  // block and a device's open has no effect; the type is checked on it.
  auto ref = open_beneath(root_fd, path, O_PATH);
  if (!ref)
    return ref.error();
  struct stat st{};
  if (::fstat(ref->get(), &st) != 0)
    return errno_failure(path.display() + ": fstat");
  if (S_ISDIR(st.st_mode))
    return failure{EISDIR, path.display() + ": is a directory (list it instead)"};
  if (!S_ISREG(st.st_mode))
    return failure{special_file_errno,
                   path.display() + ": a " + to_string(type_of_mode(st.st_mode)) +
                     ", not a regular file: it is not read"};
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return failure{EFBIG, path.display() + ": " + std::to_string(st.st_size) +
                            " bytes, more than the " + std::to_string(max_bytes) + " allowed"};
  // Reopened for reading through the daemon's own /proc/self/fd: the very
  // inode the O_PATH fd holds, checked above, whatever the path names now.
  const std::string self_fd = "/proc/self/fd/" + std::to_string(ref->get());
  unique_fd file(::open(self_fd.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  if (!file)
    return errno_failure(path.display() + ": open for reading");
  struct stat again{};
  if (::fstat(file.get(), &again) != 0 || !same_file(st, again) || !S_ISREG(again.st_mode))
    return failure{tree_changed_errno, path.display() + ": changed while it was opened"};
  workspace_download d;
  d.path_ = path;
  d.file_ = std::move(file);
  d.size_ = static_cast<uint64_t>(st.st_size);
  d.entry_.name = path.is_root() ? std::string() : path.parts.back();
  d.entry_.type = entry_type::file;
  d.entry_.size = d.size_;
  d.entry_.mode = static_cast<uint32_t>(st.st_mode & 07777);
  d.entry_.mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  return d;
}

outcome<std::string> workspace_download::read(std::size_t max) {
  if (offset_ >= size_)
    return std::string();
  const auto want = static_cast<std::size_t>(std::min<uint64_t>(max, size_ - offset_));
  std::string buf(want, '\0');
  std::size_t got = 0;
  while (got < want) {
    const ssize_t n = ::pread(file_.get(), buf.data() + got, want - got,
                              static_cast<off_t>(offset_ + got));
    if (n < 0) {
      if (errno == EINTR)
        continue;
      return errno_failure(path_.display() + ": read");
    }
    if (n == 0)
      return failure{tree_changed_errno,
                     path_.display() + ": the file shrank while it was read (from " +
                       std::to_string(size_) + " bytes): the download is incomplete"};
    got += static_cast<std::size_t>(n);
  }
  offset_ += got;
  return buf;
}

} // namespace castellan::platform
