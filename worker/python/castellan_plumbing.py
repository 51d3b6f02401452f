"""castellan_plumbing: what every mode of the harness shares below its
core (castellan_runtime): what it imports and when, how user code's
stdout and stderr reach the wire, and how the outcome of user code is
described in a RESULT.

What it imports, and when. Start-up is split in two so that a new worker is
READY about as soon as the interpreter itself: before READY only what
attaching the wire needs is imported; what serving a request needs (json,
traceback, subprocess, the site directories, the denial socket) and the warm
modules user code is likely to import (PRELOAD) are loaded afterwards, one
step at a time, while no request is waiting (HarnessCore runs the steps).
The serving modules are bound, once imported, into the globals of every
harness module that asked for them (late_bound): each module names them as
its own globals, so that using one costs a plain global lookup, and none of
them is imported before READY. castellan_tighten is bound the same way by
the first TIGHTEN.

Stdout and stderr. sys.stdout / sys.stderr write STDOUT/STDERR frames of
the current request (_FrameRaw); fd 1 and 2 are pipes drained into frames
as well (_Pump), so that output written below sys.stdout (os.write, C
extensions, child processes) is captured and never blocks the writer.

Outcomes. The exit code of a SystemExit as CPython computes it, an
exception as its type, message and traceback without the harness's own
frames (HARNESS_FILES), text that encodes to UTF-8 whatever the code
raised, and the status of a program that could not be started.
"""

import _thread
import gc
import io
import os
import select
import sys

import castellan_wire as wire

# --- what the harness imports, and when ----------------------------------------

#: The names late_bound() binds (to None until imported).
LATE_NAMES = ("ctypes", "functools", "json", "linecache", "site", "socket", "subprocess",
              "threading", "traceback", "tighten")
ctypes = functools = json = linecache = site = socket = subprocess = None
threading = traceback = None
tighten = None  # castellan_tighten, imported by the first TIGHTEN (_import_tighten)

#: The globals of the modules that use the late names (this one included).
_BOUND = [globals()]


def late_bound(namespace):
    """Binds LATE_NAMES in `namespace` (a module's globals) to what is
    imported now (None for what is not), and again whenever one is imported."""
    namespace.update({name: globals()[name] for name in LATE_NAMES})
    _BOUND.append(namespace)


def _bind(**modules):
    for namespace in _BOUND:
        namespace.update(modules)


#: Where the harness's own modules are.
_HERE = os.path.dirname(os.path.abspath(__file__))

#: Imported after READY, while idle, so that user code finds them warm.
PRELOAD = ("re", "collections", "functools", "itertools", "math", "datetime", "random",
           "string", "textwrap", "dataclasses", "typing", "pathlib", "base64", "hashlib")


def _preloader(name):
    """A start-up step importing `name` (a module that fails to import is
    left for user code to fail on)."""
    def step():
        try:
            __import__(name)
        except Exception:
            pass
    return step


def _freeze_shared_objects():
    """The zygote's last start-up step: what it holds now is shared with every
    child; keeping the collector off these objects spares the children
    copying their pages when a collection would touch them."""
    gc.collect()
    gc.freeze()


def _import_serving_modules():
    """The modules the harness needs to run a request (results are JSON,
    exceptions become tracebacks, commands are subprocesses)."""
    import ctypes
    import functools
    import json
    import linecache
    import site
    import socket
    import subprocess
    import threading
    import traceback
    _bind(ctypes=ctypes, functools=functools, json=json, linecache=linecache, site=site,
          socket=socket, subprocess=subprocess, threading=threading, traceback=traceback)


def _import_tighten():
    """castellan_tighten, when the first TIGHTEN arrives: a pool that never
    narrows an exec never pays for it. Imported from the harness's own
    directory only (user code never sees that directory on sys.path)."""
    if tighten is None:
        sys.path.insert(0, _HERE)
        try:
            import castellan_tighten
        finally:
            sys.path.remove(_HERE)
        _bind(tighten=castellan_tighten)
    return tighten


def _import_own(name):
    """The harness's module `name`, imported from the harness's own
    directory, or already imported (by castellan-launcher's warm_up, whose
    directory is the host's, not the sandbox's). User code never sees that
    directory on sys.path: no user code runs while it is there."""
    module = sys.modules.get(name)
    if module is None:
        sys.path.insert(0, _HERE)
        try:
            module = __import__(name)
        finally:
            sys.path.remove(_HERE)
    return module


def _import_clean():
    """castellan_clean, for the fork-mode zygote."""
    return _import_own("castellan_clean")


def _light_site():
    """What site.main() gives user code, without running .pth files or
    sitecustomize (the worker starts Python with -S): the site-packages
    directories on sys.path and the exit()/quit()/help() builtins."""
    for directory in site.getsitepackages():
        if os.path.isdir(directory) and directory not in sys.path:
            sys.path.append(directory)
    site.setquit()
    site.setcopyright()
    site.sethelper()


# --- outcomes ----------------------------------------------------------------------

#: The harness's own modules, by file name: the body of the harness, the wire,
#: and the tightening (imported by the first TIGHTEN); castellan_clean runs
#: in the zygote between execs, never below user code.
_HARNESS_MODULES = ("castellan_runtime.py", "castellan_plumbing.py", "castellan_denials.py",
                    "castellan_shared_mode.py", "castellan_command_mode.py",
                    "castellan_fork_mode.py", "castellan_zygote.py", "castellan_wire.py",
                    "castellan_tighten.py", "castellan_setup.py", "castellan_files.py",
                    "castellan_session_mode.py", "castellan_whole_file_writes.py")
_DIR = os.path.dirname(__file__)

#: Frames from these files are the harness's, never shown in a traceback, and
#: never interrupted by KeyboardInterrupt (see castellan_runtime.HarnessCore._on_sigint).
HARNESS_FILES = frozenset(
    path
    for name in _HARNESS_MODULES
    for path in (os.path.join(_DIR, name), os.path.abspath(os.path.join(_DIR, name)))
) | frozenset(
    path
    for path in (getattr(sys.modules.get("__main__"), "__file__", None),)
    if path is not None
    for path in (path, os.path.abspath(path))
)


def _clean_text(text):
    """Text that encodes to UTF-8 (lone surrogates become \\udcxx escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def _system_exit_code(e):
    """(exit code, text for stderr or None), as CPython ends a script."""
    code = e.code
    if code is None:
        return 0, None
    if isinstance(code, int):
        # bool is an int (sys.exit(True) is 1); beyond a C int CPython's own
        # status would be truncated, so such codes are reported as 1.
        code = int(code)
        return (code if -2**31 <= code < 2**31 else 1), None
    try:
        text = str(code)
    except BaseException:
        text = "<exit code str() failed>"
    return 1, text + "\n"


def _type_name(t):
    module = getattr(t, "__module__", None)
    name = getattr(t, "__qualname__", t.__name__)
    if module in (None, "builtins", "__main__"):
        return name
    return f"{module}.{name}"


def _strip_harness_frames(te, seen=None):
    """Removes our own frames from a TracebackException and its chain."""
    if seen is None:
        seen = set()
    if te is None or id(te) in seen:
        return
    seen.add(id(te))
    te.stack = traceback.StackSummary.from_list(
        [f for f in te.stack if f.filename not in HARNESS_FILES])
    _strip_harness_frames(te.__cause__, seen)
    _strip_harness_frames(te.__context__, seen)
    for sub in getattr(te, "exceptions", None) or ():
        _strip_harness_frames(sub, seen)


def _describe_exception(e):
    try:
        message = str(e)
    except BaseException:
        message = "<exception str() failed>"
    try:
        te = traceback.TracebackException(type(e), e, e.__traceback__, compact=True)
        _strip_harness_frames(te)
        text = "".join(te.format())
    except BaseException as failure:  # a hostile __str__ or __repr__ deep in the chain
        text = f"<traceback unavailable: {type(failure).__name__}>\n"
    return {"type": _clean_text(_type_name(type(e))), "message": _clean_text(message),
            "traceback": _clean_text(text)}


def _exec_failure_status(error):
    """(exit code, reason for stderr) of a program that could not be
    started: 127 when it was not found, 126 otherwise, as a shell says it."""
    if isinstance(error, FileNotFoundError):
        return 127, "No such file or directory"
    if isinstance(error, PermissionError):
        return 126, "Permission denied"
    if isinstance(error, OSError) and error.strerror:
        return 126, error.strerror
    return 126, type(error).__name__


# --- stdout and stderr ---------------------------------------------------------------

class _FrameRaw(io.RawIOBase):
    """The raw layer under sys.stdout / sys.stderr: each write becomes
    STDOUT/STDERR frames of the current request (the BufferedWriter above
    makes them up to 64 KiB). In a process forked by user code the wire is
    not ours to use: writes go to fd 1/2 instead, which the parent's pumps
    capture."""

    def __init__(self, harness, mtype, fd):
        super().__init__()
        self._harness = harness
        self._mtype = mtype
        self._fd = fd

    def writable(self):
        return True

    def isatty(self):
        return False

    def fileno(self):
        # fd 1 / 2 are the pipes the pumps drain: writing to them directly
        # (or handing them to a subprocess) is captured as well.
        return self._fd

    def write(self, b):
        h = self._harness
        # Safe point for a deferred KeyboardInterrupt: nothing of this write
        # has been sent, and the BufferedWriter keeps it for a later flush.
        h.take_pending_interrupt()
        view = memoryview(b).cast("B")
        if h.in_forked_child:
            done = 0
            while done < len(view):
                done += os.write(self._fd, view[done:])
            return len(view)
        h.wire.send_stream(self._mtype, h.request_id, view)
        return len(view)


class _Pump:
    """Drains the pipe behind fd 1 or 2 into frames, so that output written
    below sys.stdout (os.write(1, ...), C extensions, child processes) is not
    lost and never blocks the writer. A thread reads whenever data arrives;
    the main thread drains it once more, under the same lock, before RESULT,
    so all of a request's fd-level output precedes its RESULT. In fork mode
    there is no thread: the harness has nothing else to do while the child
    runs, and drains the pipes in the loop that waits for it.

    Order: fd-level output and sys.stdout output travel separately (the
    latter is buffered in-process up to 64 KiB), so their relative order
    within a request may differ from the order of the writes."""

    def __init__(self, harness, target_fd, mtype, threaded=True):
        self._harness = harness
        self.target_fd = target_fd
        self._mtype = mtype
        self.read_fd, self.write_fd = os.pipe()  # both non-inheritable
        os.set_blocking(self.read_fd, False)
        self.lock = _thread.allocate_lock()
        self.restore()
        if threaded:
            _thread.start_new_thread(self._run, ())

    def restore(self):
        """Points fd 1/2 at the pipe again (user code may close or dup2 it)."""
        os.dup2(self.write_fd, self.target_fd)

    def _run(self):
        poller = select.poll()
        poller.register(self.read_fd, select.POLLIN)
        while True:
            poller.poll()
            with self.lock:
                self.drain()

    def drain(self):
        """Sends what the pipe holds now; the caller holds `lock`."""
        h = self._harness
        while True:
            try:
                data = os.read(self.read_fd, wire.STREAM_CHUNK)
            except BlockingIOError:
                return
            if not data:
                return  # cannot happen while we hold the write end
            h.wire.send_stream(self._mtype, h.request_id, data)

    def forward(self, send=True):
        """Fork mode: sends what the pipe holds, once poll said it is
        readable (reads until one comes back short, so that an empty pipe
        rarely costs an exception). With `send` false the bytes are dropped:
        before an exec, what was written after the last RESULT belongs to no
        exec."""
        h = self._harness
        while True:
            try:
                data = os.read(self.read_fd, wire.STREAM_CHUNK)
            except BlockingIOError:
                return
            if send and data:
                h.wire.send_stream(self._mtype, h.request_id, data)
            if len(data) < wire.STREAM_CHUNK:
                return
