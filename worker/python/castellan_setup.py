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
_TextIOWrapper = io.TextIOWrapper

#: cwd length, environment block length, stdin length, flags (docs/wire.md).
_HEADER = struct.Struct("<IIII")

#: Flag: the request's output is streamed (line-buffered, handed over at once).
STREAM_OUTPUT = 1

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
    `stream` (its output is streamed)."""

    __slots__ = ("cwd", "env", "stdin", "stream")

    def __init__(self, cwd, env, stdin, stream=False):
        self.cwd = cwd
        self.env = env
        self.stdin = stdin
        self.stream = stream


def parse(payload):
    """The Setup of a SETUP payload; SetupError if it is malformed."""
    view = memoryview(payload)
    if len(view) < _HEADER.size:
        raise SetupError(f"SETUP payload of {len(view)} bytes is shorter than its header")
    cwd_size, env_size, stdin_size, flags = _HEADER.unpack_from(view)
    if flags & ~STREAM_OUTPUT:
        raise SetupError(f"SETUP flags {flags:#x} name an unknown flag")
    if _HEADER.size + cwd_size + env_size + stdin_size != len(view):
        raise SetupError("SETUP lengths do not add up to its payload")
    start = _HEADER.size
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
    stdin = view[start:] if stdin_size else None
    return Setup(cwd, env, stdin, bool(flags & STREAM_OUTPUT))


def apply(setup, environ):
    """Applies `setup` to this process: the variables (into `environ`, the
    process's os.environ as the caller knows it), the working directory,
    stdin on fd 0 (and sys.stdin). Returns None, or the line that explains
    why the request cannot run (its directory cannot be entered, its stdin
    cannot be made), which the caller reports with EXIT_NO_CWD."""
    for name, value in setup.env:
        # os.environ's own encoding (surrogateescape) keeps any bytes.
        environ[os.fsdecode(name)] = os.fsdecode(value)
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
