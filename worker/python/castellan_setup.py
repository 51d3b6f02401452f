"""castellan_setup: a request's environment, working directory and stdin
(the SETUP frame, docs/wire.md), applied in the process that runs the
request's code or program, right before it runs.

stdin is a memfd on fd 0 rather than a pipe: it holds any
amount without a writer waiting beside the code, it is charged to the
worker's memory limit, and a program that seeks on its stdin can.
"""

import io
import os
import struct
import sys

# Bound once, at import: in shared mode user code shares this interpreter
# and may replace os.* between requests; the set-up must not go through
# what it replaced (a recording os.write would see the next request's stdin).
from posix import chdir as _chdir, close as _close, dup2 as _dup2, lseek as _lseek, \
    memfd_create as _memfd_create, write as _write, strerror as _strerror
_FileIO = io.FileIO

import castellan_files as _files
_TextIOWrapper = io.TextIOWrapper

#: cwd length, environment block length, stdin length, flags (docs/wire.md).
_HEADER = struct.Struct("<IIII")
#: With FILES: the files block's length, after the header.
_FILES_LEN = struct.Struct("<I")
#: The files block: how many files to write, how many to read back.
_FILES_COUNTS = struct.Struct("<II")
#: A file to write: path length, mode, content length.
_FILE_IN = struct.Struct("<III")
#: A file to read back: path length.
_FILE_OUT = struct.Struct("<I")

#: Flag: the request's output is streamed (line-buffered, handed over at once).
STREAM_OUTPUT = 1
#: Flag: the request has files to write and files to read back.
FILES = 2

_MFD_CLOEXEC = 0x0001
_MFD_NOEXEC_SEAL = 0x0008  # Linux 6.3+; the sandbox may refuse memfds without it

#: The exit code of a request whose working directory cannot be entered
#: (or whose stdin cannot be made): the one a shell gives a command it
#: cannot execute.
EXIT_NO_CWD = 126


class SetupError(Exception):
    """A SETUP payload that does not follow the format: a broken wire."""


class Setup:
    """One request's set-up, parsed: `cwd` (bytes or None), `env` (a list of
    (name, value) bytes pairs), `stdin` (a bytes-like object or None),
    `stream` (its output is streamed), `files_in` (a list of (path, mode,
    content)), `files_out` (a list of paths); paths are absolute bytes."""

    __slots__ = ("cwd", "env", "stdin", "stream", "files_in", "files_out")

    def __init__(self, cwd, env, stdin, stream=False, files_in=(), files_out=()):
        self.cwd = cwd
        self.env = env
        self.stdin = stdin
        self.stream = stream
        self.files_in = list(files_in)
        self.files_out = list(files_out)


def parse(payload):
    """The Setup of a SETUP payload; SetupError if it is malformed."""
    view = memoryview(payload)
    if len(view) < _HEADER.size:
        raise SetupError(f"SETUP payload of {len(view)} bytes is shorter than its header")
    cwd_size, env_size, stdin_size, flags = _HEADER.unpack_from(view)
    if flags & ~(STREAM_OUTPUT | FILES):
        raise SetupError(f"SETUP flags {flags:#x} name an unknown flag")
    start = _HEADER.size
    files_size = 0
    if flags & FILES:
        if len(view) < start + _FILES_LEN.size:
            raise SetupError("SETUP payload is shorter than its header")
        files_size = _FILES_LEN.unpack_from(view, start)[0]
        start += _FILES_LEN.size
    if start + cwd_size + env_size + stdin_size + files_size != len(view):
        raise SetupError("SETUP lengths do not add up to its payload")
    cwd = bytes(view[start:start + cwd_size]) or None
    start += cwd_size
    block = bytes(view[start:start + env_size])
    start += env_size
    if cwd is not None and (not cwd.startswith(b"/") or b"\0" in cwd):
        raise SetupError("SETUP cwd is not an absolute path")
    env = []
    if block:
        if not block.endswith(b"\0"):
            raise SetupError("SETUP environment block does not end with a NUL byte")
        for entry in block[:-1].split(b"\0"):
            name, eq, value = entry.partition(b"=")
            if not name or not eq:
                raise SetupError("SETUP environment entry is not NAME=VALUE")
            env.append((name, value))
    stdin = view[start:start + stdin_size] if stdin_size else None
    start += stdin_size
    files_in, files_out = ([], []) if not flags & FILES else _parse_files(view[start:])
    return Setup(cwd, env, stdin, bool(flags & STREAM_OUTPUT), files_in, files_out)


def _file_path(view, start, size):
    """A resolved path of the files block: absolute, no empty, `.` or `..`
    component, no NUL (the supervisor resolved it)."""
    if start + size > len(view):
        raise SetupError("SETUP files block is cut short")
    path = bytes(view[start:start + size])
    parts = path.split(b"/")
    if (not path.startswith(b"/") or b"\0" in path or len(parts) < 2
            or any(p in (b"", b".", b"..") for p in parts[1:])):
        raise SetupError("SETUP file path is not a resolved absolute path")
    return path


def _parse_files(view):
    if len(view) < _FILES_COUNTS.size:
        raise SetupError("SETUP files block is shorter than its counts")
    n_in, n_out = _FILES_COUNTS.unpack_from(view)
    start = _FILES_COUNTS.size
    files_in, files_out = [], []
    for _ in range(n_in):
        if start + _FILE_IN.size > len(view):
            raise SetupError("SETUP files block is cut short")
        path_size, mode, content_size = _FILE_IN.unpack_from(view, start)
        start += _FILE_IN.size
        if mode > 0o777:
            raise SetupError("SETUP file mode is not permission bits")
        path = _file_path(view, start, path_size)
        start += path_size
        if start + content_size > len(view):
            raise SetupError("SETUP files block is cut short")
        files_in.append((path, mode, view[start:start + content_size]))
        start += content_size
    for _ in range(n_out):
        if start + _FILE_OUT.size > len(view):
            raise SetupError("SETUP files block is cut short")
        path_size = _FILE_OUT.unpack_from(view, start)[0]
        start += _FILE_OUT.size
        files_out.append(_file_path(view, start, path_size))
        start += path_size
    if start != len(view):
        raise SetupError("SETUP files block has bytes beyond its files")
    return files_in, files_out


def parse_files(payload):
    """(files_in, files_out) of a SETUP payload that parse() accepted,
    without copying its environment or stdin (the zygote's heap must not
    keep them): files_in's contents are views of the payload."""
    view = memoryview(payload)
    cwd_size, env_size, stdin_size, flags = _HEADER.unpack_from(view)
    if not flags & FILES:
        return [], []
    start = _HEADER.size + _FILES_LEN.size + cwd_size + env_size + stdin_size
    return _parse_files(view[start:])


def files_module():
    """castellan_files, as this module bound it at import."""
    return _files


def apply(setup, environ):
    """Applies `setup` to this process: the variables (into `environ`, the
    process's os.environ as the caller knows it), the files, the working
    directory, stdin on fd 0 (and sys.stdin). Returns None, or the line that
    explains why the request cannot run (a file cannot be written, its
    directory cannot be entered, its stdin cannot be made), which the caller
    reports with EXIT_NO_CWD."""
    for name, value in setup.env:
        # os.environ's own encoding (surrogateescape) keeps any bytes.
        environ[os.fsdecode(name)] = os.fsdecode(value)
    # The files first: a working directory may be one they make.
    if setup.files_in:
        for path, mode, content in setup.files_in:
            try:
                _files.write_file(path, mode, content)
            except OSError as e:
                where = path.decode("utf-8", "backslashreplace")
                return (f"castellan: cannot write the file '{where}': "
                        f"{_files.reason(e)}\n")
    if setup.cwd is not None:
        try:
            _chdir(setup.cwd)
        except OSError as e:
            where = setup.cwd.decode("utf-8", "backslashreplace")
            return f"castellan: cannot enter the working directory '{where}': {e.strerror}\n"
    if setup.stdin is not None:
        try:
            _stdin_from(setup.stdin)
        except OSError as e:
            return f"castellan: cannot give the exec its stdin: {_strerror(e.errno)}\n"
    if setup.stream:
        # Each line reaches the worker's fd or frame writer when printed.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.reconfigure(line_buffering=True)
            except (AttributeError, ValueError, OSError):
                pass
    return None


def _stdin_from(data):
    try:
        fd = _memfd_create("stdin", _MFD_CLOEXEC | _MFD_NOEXEC_SEAL)
    except OSError:
        fd = _memfd_create("stdin", _MFD_CLOEXEC)  # a kernel before 6.3
    try:
        view = memoryview(data)
        while view:
            view = view[_write(fd, view):]
        _lseek(fd, 0, 0)
        if fd != 0:  # fd 0 was closed: the memfd is fd 0 already
            _dup2(fd, 0)
    finally:
        if fd != 0:
            _close(fd)
    sys.stdin = sys.__stdin__ = _TextIOWrapper(_FileIO(0, "r", closefd=False), encoding="utf-8")
