"""castellan_files: a request's files (files_in, files_out; docs/wire.md),
written before its code runs and read back after it ended.

Every path arrives resolved by the supervisor (absolute, no `.` or `..`).
It is walked here one component at a time from `/`, each directory opened
with O_PATH | O_NOFOLLOW, so that a symlink on the way — one an earlier
exec planted in shared mode, or one the code made before its files are read
— is an error (ELOOP), never followed. A file is written to a fresh name
(O_EXCL) in its directory and renamed over the path: whatever stood there (a
symlink, a hard link to another file, a FIFO) is replaced, never written
through. A file is read back only when it is a regular file, not on /proc,
/sys or the like, within the size limits; it is opened O_NONBLOCK so that a
FIFO swapped in between the check and the open cannot block the reader.
"""

import stat
import struct

# Bound once, at import: in shared mode user code shares this interpreter
# and may replace os.* between requests.
from posix import O_CLOEXEC, O_CREAT, O_DIRECTORY, O_EXCL, O_NOCTTY, O_NOFOLLOW, O_NONBLOCK, \
    O_PATH, O_RDONLY, O_WRONLY
from posix import close as _close, fchmod as _fchmod, fstat as _fstat, getpid as _getpid, \
    lstat as _lstat, mkdir as _mkdir, open as _open, readv as _readv, rename as _rename, \
    strerror as _strerror, unlink as _unlink, write as _write

#: The largest file read back, and the most all of one request's files
#: bring back together (actors/pool/exec_setup.hpp; the pool checks both).
MAX_FILE_BYTES = 8 << 20
MAX_TOTAL_BYTES = 32 << 20

#: FILE frame status (docs/wire.md, actors/pool/exec_files.hpp).
CONTENT, MISSING, NOT_REGULAR, TOO_LARGE, UNREADABLE, OVER_TOTAL = range(6)

#: A FILE frame's header: index, status, size.
FRAME_HEADER = struct.Struct("<IBQ")

_ELOOP, _ENOENT, _ENOTDIR, _ENXIO, _EEXIST = 40, 2, 20, 6, 17

#: File systems whose files are not data an exec left: the process's own
#: view of the kernel (read by a process that serves the exec, they would
#: show its state, not the exec's).
_PSEUDO_FS = frozenset({
    0x9fa0,      # proc
    0x62656572,  # sysfs
    0x27e0eb,    # cgroup
    0x63677270,  # cgroup2
    0x64626720,  # debugfs
    0x74726163,  # tracefs
    0x73636673,  # securityfs
    0xcafe4a11,  # bpf
    0x6e736673,  # nsfs
    0x42494e4d,  # binfmt_misc
})

_counter = [0]
_statfs = []


def reason(error):
    """The words for an OSError of a file path."""
    if error.errno == _ELOOP:
        return "a symlink is on its path (not followed)"
    if error.errno == _ENOTDIR:
        return "a component of its path is not a directory"
    return _strerror(error.errno) if error.errno else str(error)


def _walk(path, create):
    """(O_PATH fd of the path's directory, last component), walking from `/`
    without following any symlink; missing directories are made (0755) when
    `create`."""
    parts = path.split(b"/")[1:]
    fd = _open(b"/", O_PATH | O_DIRECTORY | O_CLOEXEC)
    try:
        for part in parts[:-1]:
            try:
                nfd = _open(part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            except NotADirectoryError:
                # O_PATH | O_NOFOLLOW takes a symlink itself, which is no
                # directory: say which it was.
                if stat.S_ISLNK(_lstat(part, dir_fd=fd).st_mode):
                    raise OSError(_ELOOP, "a symlink is on the path") from None
                raise
            except FileNotFoundError:
                if not create:
                    raise
                try:
                    _mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass  # made meanwhile: opened below, no symlink followed
                nfd = _open(part, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, dir_fd=fd)
            _close(fd)
            fd = nfd
    except BaseException:
        _close(fd)
        raise
    return fd, parts[-1]


def write_file(path, mode, content):
    """Writes `content` at `path` (absolute, resolved) with permission bits
    `mode`: into a new file beside it, renamed over the name."""
    parent, name = _walk(path, create=True)
    try:
        fd = tmp = None
        for _ in range(16):
            _counter[0] += 1
            tmp = b".castellan-in-%d-%d" % (_getpid(), _counter[0])
            try:
                fd = _open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0o600,
                           dir_fd=parent)
                break
            except FileExistsError:
                continue
        if fd is None:
            raise FileExistsError(_EEXIST, "no free name for the new file")
        try:
            try:
                view = memoryview(content)
                while view:
                    view = view[_write(fd, view):]
                _fchmod(fd, mode)
            finally:
                _close(fd)
            _rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            try:
                _unlink(tmp, dir_fd=parent)
            except OSError:
                pass
            raise
    finally:
        _close(parent)


def remove_file(path):
    """Removes the entry at `path` (whatever it is now, never a directory,
    never through a symlink); quietly does nothing when it cannot."""
    try:
        parent, name = _walk(path, create=False)
    except OSError:
        return
    try:
        _unlink(name, dir_fd=parent)
    except OSError:
        pass
    finally:
        _close(parent)


def _fs_type(fd):
    """The file system magic of `fd` (fstatfs), or None if unknown."""
    if not _statfs:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        fstatfs = libc.fstatfs
        fstatfs.argtypes = [ctypes.c_int, ctypes.c_void_p]
        fstatfs.restype = ctypes.c_int
        _statfs.append((fstatfs, ctypes.create_string_buffer(256), ctypes))
    fstatfs, buf, ctypes = _statfs[0]
    if fstatfs(fd, buf) != 0:
        return None
    # struct statfs begins with f_type, a long.
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def _open_regular(path):
    """(fd, size) of the regular file at `path`, or (None, status, size)."""
    try:
        parent, name = _walk(path, create=False)
    except OSError as e:
        if e.errno == _ENOENT:
            return None, MISSING, 0
        if e.errno in (_ELOOP, _ENOTDIR):
            return None, NOT_REGULAR, 0
        return None, UNREADABLE, e.errno or 5
    try:
        try:
            st = _lstat(name, dir_fd=parent)
        except OSError as e:
            return (None, MISSING, 0) if e.errno == _ENOENT else (None, UNREADABLE, e.errno or 5)
        if not stat.S_ISREG(st.st_mode):
            return None, NOT_REGULAR, 0
        try:
            fd = _open(name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC,
                       dir_fd=parent)
        except OSError as e:
            if e.errno == _ENOENT:
                return None, MISSING, 0
            if e.errno in (_ELOOP, _ENXIO):
                return None, NOT_REGULAR, 0
            return None, UNREADABLE, e.errno or 5
    finally:
        _close(parent)
    st = _fstat(fd)
    kind = _fs_type(fd) if stat.S_ISREG(st.st_mode) else None
    if not stat.S_ISREG(st.st_mode) or kind is None or kind in _PSEUDO_FS:
        _close(fd)
        return None, NOT_REGULAR, 0
    return fd, CONTENT, st.st_size


def read_files(paths):
    """Yields, per path of `paths` in order, (index, status, size, data):
    data is a bytearray of `size` bytes for CONTENT (the caller zeroes it
    when it must not stay in memory), else empty; size is the file's size
    for TOO_LARGE and OVER_TOTAL, the errno for UNREADABLE."""
    total = 0
    for index, path in enumerate(paths):
        fd, status, size = _open_regular(path)
        if fd is None:
            yield index, status, size, b""
            continue
        try:
            if size > MAX_FILE_BYTES:
                yield index, TOO_LARGE, size, b""
                continue
            if total + size > MAX_TOTAL_BYTES:
                yield index, OVER_TOTAL, size, b""
                continue
            # What the file holds now, at most its size when it was opened:
            # a file that grows or shrinks meanwhile is cut at what was read.
            data = bytearray(size)
            view = memoryview(data)
            done = 0
            try:
                while done < size:
                    n = _readv(fd, [view[done:]])
                    if n == 0:
                        break
                    done += n
            except OSError as e:
                data[:] = bytes(len(data))
                yield index, UNREADABLE, e.errno or 5, b""
                continue
            finally:
                view.release()
            if done < size:
                data[done:] = b""
            total += done
            yield index, CONTENT, done, data
        finally:
            _close(fd)
