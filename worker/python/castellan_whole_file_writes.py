"""castellan_whole_file_writes: a session's files in /workspace are written
whole or not at all.

A session's exec may be killed at any instant (a timeout, a cancel, the
OOM killer) while its code writes a file of the workspace, which outlives
the session. A file opened for writing through Python's open() (builtins,
io, pathlib) below /workspace is therefore written to an unnamed file in
the same directory (O_TMPFILE) and put in the place of its path only when
it is closed (linked under a temporary name, then renamed over the path:
one atomic step for a reader). A kill before that leaves the path as it
was, and the unnamed file goes with the process. Append and update modes
start from a copy of the file. docs/sessions.md says what is covered and
what is not (os.open, other programs, native code write in place).
"""

import errno
import io
import os
import secrets
import stat

WORKSPACE = "/workspace"


def _writes(mode):
    return any(c in mode for c in "wax+")


class _WholeFile(io.FileIO):
    """The unnamed file; close() puts it in place of `target`."""

    def __init__(self, fd, mode, directory_fd, base, exclusive):
        super().__init__(fd, mode, closefd=True)
        self._directory = directory_fd  # ours: closed with the file
        self._base = base
        self._exclusive = exclusive
        self._failed = False
        self._done = False

    def write(self, b):
        try:
            return super().write(b)
        except OSError:
            # A write that failed (ENOSPC, EDQUOT, EFBIG) leaves the path as
            # it was when the file closes: never a file cut short.
            self._failed = True
            raise

    def discard(self):
        """Closes without putting the file in place."""
        self._done = True
        self._close_all()

    def close(self):
        if self.closed or self._done:
            return super().close()
        self._done = True
        try:
            if not self._failed:
                self._commit()
        finally:
            self._close_all()

    def _copy_in_place(self):
        out = os.open(self._base, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o666,
                      dir_fd=self._directory)
        try:
            offset = 0
            while True:
                chunk = os.pread(self.fileno(), 1 << 20, offset)
                if not chunk:
                    break
                _write_all(out, chunk)
                offset += len(chunk)
        finally:
            os.close(out)

    def _close_all(self):
        try:
            super().close()
        finally:
            if self._directory >= 0:
                os.close(self._directory)
                self._directory = -1

    def _commit(self):
        # Relative to the directory as it was opened: a rename of a
        # directory above it meanwhile changes nothing. linkat() with
        # AT_SYMLINK_FOLLOW on the fd's /proc link needs no capability
        # (AT_EMPTY_PATH would); dst_dir_fd makes os.link use linkat.
        source = "/proc/self/fd/%d" % self.fileno()
        d = self._directory
        if self._exclusive:
            os.link(source, self._base, dst_dir_fd=d, follow_symlinks=True)
            return
        temporary = ".%s.castellan-%s" % (self._base, secrets.token_hex(6))
        try:
            os.link(source, temporary, dst_dir_fd=d, follow_symlinks=True)
        except OSError as e:
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise
            # A policy that refuses the link (or a /proc without the fd)
            # must not cost the write itself: in place, as open() writes.
            self._copy_in_place()
            return
        try:
            os.replace(temporary, self._base, src_dir_fd=d, dst_dir_fd=d)
        except BaseException:
            os.unlink(temporary, dir_fd=d)
            raise


def _target_of(file):
    """The real path below /workspace that `file` names, or None."""
    if isinstance(file, int):
        return None
    try:
        path = os.fsdecode(os.fspath(file))
    except TypeError:
        return None
    real = os.path.realpath(path)
    if not real.startswith(WORKSPACE + "/"):
        return None
    return real


def install(module_io, module_builtins):
    """Puts whole-file open() in place of io.open and builtins.open."""
    original = module_io.open

    def whole_file_open(file, mode="r", buffering=-1, encoding=None, errors=None,
                        newline=None, closefd=True, opener=None):
        target = _target_of(file) if (closefd and opener is None and _writes(mode)) else None
        if target is None:
            return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
        try:
            st = os.stat(target)
        except FileNotFoundError:
            st = None
        except OSError:
            st = None
        # What open() itself refuses (a directory, 'x' on an existing file,
        # 'r+' on a missing one, bad arguments), and what is not a regular
        # file, it answers as it always does.
        if (st is not None and not stat.S_ISREG(st.st_mode)) or \
                (st is not None and "x" in mode) or (st is None and "r" in mode) or \
                (st is not None and st.st_nlink > 1):
            return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
        binary = "b" in mode
        directory, base = os.path.split(target)
        try:
            dfd = os.open(directory, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError:
            return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
        try:
            fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o666, dir_fd=dfd)
        except OSError:
            # No O_TMPFILE here (or no right to make a file): as open() does.
            os.close(dfd)
            return original(file, mode, buffering, encoding, errors, newline, closefd, opener)
        raw = None
        try:
            if st is not None:
                os.fchmod(fd, stat.S_IMODE(st.st_mode))
                if "w" not in mode:
                    with original(target, "rb") as old:
                        while True:
                            chunk = old.read(1 << 20)
                            if not chunk:
                                break
                            _write_all(fd, chunk)
                    if "a" not in mode:
                        os.lseek(fd, 0, os.SEEK_SET)
            raw_mode = ("a" if "a" in mode else "r" if "r" in mode else "w") + \
                ("+" if "+" in mode else "")
            raw = _WholeFile(fd, raw_mode, dfd, base, "x" in mode)
            fd = dfd = -1
            raw.name = file
            if buffering == 0:
                if not binary:
                    raise ValueError("can't have unbuffered text I/O")
                return raw
            size = io.DEFAULT_BUFFER_SIZE if buffering in (-1, 1) else buffering
            buffer = io.BufferedRandom(raw, size) if "+" in mode else io.BufferedWriter(raw, size)
            if binary:
                return buffer
            text = io.TextIOWrapper(buffer, encoding, errors, newline,
                                    line_buffering=(buffering == 1))
            text.mode = mode
            return text
        except BaseException:
            if raw is not None:
                raw.discard()
            for f in (fd, dfd):
                if f >= 0:
                    os.close(f)
            raise

    module_io.open = whole_file_open
    module_builtins.open = whole_file_open
    return whole_file_open


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
