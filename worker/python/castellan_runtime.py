"""castellan_runtime: the body of the Python harness (castellan_harness.py
is its entry point; see there for how it is started).

It attaches the wire, sends READY, then serves CODE / COMMAND / SHUTDOWN
frames from the supervisor (docs/wire.md). User code runs in a fresh __main__
module each time; its stdout and stderr (Python-level and fd-level) come back
as STDOUT/STDERR frames, then one RESULT frame.

Start-up is split in two so that a new worker is READY about as soon as the
interpreter itself: before READY only what attaching the wire needs is
imported; what serving a request needs (json, traceback, subprocess, the site
directories, the denial socket) and the warm modules user code is likely to
import (PRELOAD) are loaded afterwards, one step at a time, while no request
is waiting. A request that arrives earlier first completes the steps serving
needs; the preload resumes when the harness is idle again.

In `fork` mode each CODE runs in a child forked from a pre-imported zygote,
which reports its outcome on a private pipe and exits, so nothing the code
did (modules imported, globals, open files, threads, signal handlers,
memory) survives into the next exec. The zygote is a process of its own,
forked from the harness before READY; it does the start-up steps the
children need (and the preload), then only forks, waits and reaps. The
harness itself never forks again: after a fork every page the forking
process writes costs a fault, and the harness's wire work would pay that on
every exec. Only the harness touches the wire (the zygote drops the
segment's mapping and every fd of it); a child's output reaches it through
the fd 1/2 pipes, which it drains while it waits for the zygote's answer.

Exit codes: 0 after SHUTDOWN (or after the request in oneshot mode), 2 for a
bad command line, 3 for a broken wire, 4 when the fork-mode zygote is gone,
5 when the harness (or the zygote) cannot make itself non-dumpable, 6 when
the fork-mode zygote cannot create the exec's Landlock ruleset.
Nothing user code does is meant to end the harness except through the
process itself (os._exit, signals) or, in fork mode, its zygote.
"""

import os
import sys

import castellan_wire as wire

import _signal as signal  # the C module: `signal` itself imports enum (~2.5 ms)
import _thread
import builtins
import gc
import io
import select
import struct
import time
import types
import warnings

# What serving a request needs, imported after READY (_import_serving_modules):
# bound here so that the names are module globals from the start.
ctypes = functools = json = linecache = site = socket = subprocess = None
threading = traceback = None
tighten = None  # castellan_tighten, imported by the first TIGHTEN (_import_tighten)

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


class _ExecDomain:
    """The Landlock domain every fork-mode exec's process enters before its
    code runs, nested in the worker's: the kernel then refuses that process
    (and all it starts) ptrace-mode access (/proc/<pid>/mem, maps, environ,
    fd) to every process outside it, that is the harness, the zygote and
    PID 1, and, from ABI 6 on, signals to them and connections to abstract
    unix sockets they bound. Each exec gets a domain of its own, so one exec
    cannot reach a process another exec left behind either. It takes no file
    system or network right away: the worker's own domain already decides
    those (below ABI 6 it handles only making block devices, which nothing
    in a sandbox may do anyway, so that there is a domain at all).

    Once in it, the child is dumpable again: its own /proc/self works in
    full, and the processes that could then reach it are those in its domain
    (its own) and those outside it that serve it; another exec's processes
    are in a sibling domain.

    The zygote creates the ruleset once; the child restricts itself with it
    and closes it before the code runs (landlock_restrict_self makes a new
    domain each time). The ruleset has no rules and none can be added (it
    handles no file-system right on ABI 6 and later). On a kernel without
    Landlock there is no domain: `abi` is 0 and the children run without."""

    _SYS_CREATE_RULESET = 444
    _SYS_RESTRICT_SELF = 446
    _CREATE_RULESET_VERSION = 1
    _SCOPE_ABSTRACT_UNIX_SOCKET = 1
    _SCOPE_SIGNAL = 2
    _FS_MAKE_BLOCK = 1 << 11
    _PR_SET_NO_NEW_PRIVS = 38
    _PR_GET_NO_NEW_PRIVS = 39

    def __init__(self):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        self._libc = libc
        self.fd = -1
        abi = libc.syscall(ctypes.c_long(self._SYS_CREATE_RULESET), None, ctypes.c_long(0),
                           ctypes.c_long(self._CREATE_RULESET_VERSION))
        self.abi = max(abi, 0)
        if self.abi == 0:
            return
        if self.abi >= 6:
            attr = (ctypes.c_uint64 * 3)(0, 0, self._SCOPE_ABSTRACT_UNIX_SOCKET |
                                         self._SCOPE_SIGNAL)
        else:
            attr = (ctypes.c_uint64 * 1)(self._FS_MAKE_BLOCK)
        fd = libc.syscall(ctypes.c_long(self._SYS_CREATE_RULESET), ctypes.byref(attr),
                          ctypes.c_long(ctypes.sizeof(attr)), ctypes.c_long(0))
        if fd < 0:
            err = ctypes.get_errno()
            os.write(2, f"castellan-harness: fork mode: landlock_create_ruleset: "
                        f"{os.strerror(err)}\n".encode())
            os._exit(EXIT_NO_EXEC_DOMAIN)
        self.fd = fd  # close-on-exec, as every Landlock ruleset fd
        # The child's calls with their arguments built here (each object the
        # child creates after the fork costs it a page copy). no_new_privs,
        # which landlock_restrict_self needs without CAP_SYS_ADMIN, is set
        # in a sandboxed worker already; otherwise the child sets it.
        self._no_new_privs = None
        if libc.prctl(self._PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0) != 1:
            self._no_new_privs = (ctypes.c_int(self._PR_SET_NO_NEW_PRIVS), ctypes.c_ulong(1),
                                  ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0))
        self._restrict = (ctypes.c_long(self._SYS_RESTRICT_SELF), ctypes.c_long(fd),
                          ctypes.c_long(0))
        # Dumpable again, once in the domain: the exec's own /proc/self works
        # in full (mem, environ), and of the processes outside its domain
        # only those serving it (never another exec's) could use that.
        self._dumpable = (ctypes.c_int(_PR_SET_DUMPABLE), ctypes.c_ulong(1), ctypes.c_ulong(0),
                          ctypes.c_ulong(0), ctypes.c_ulong(0))

    def enter(self):
        """The exec's process, right after the fork: enters a new domain,
        makes itself dumpable again (it inherited the zygote's non-dumpable
        state; see the class doc) and closes the ruleset; exits (126)
        without returning if it cannot. Without Landlock it stays
        non-dumpable."""
        if self.fd < 0:
            return
        libc = self._libc
        if ((self._no_new_privs is not None and libc.prctl(*self._no_new_privs) != 0)
                or libc.syscall(*self._restrict) != 0
                or libc.prctl(*self._dumpable) != 0):
            err = ctypes.get_errno()
            try:
                os.write(2, f"castellan: the exec's process cannot enter its own Landlock "
                            f"domain: {os.strerror(err)}\n".encode())
            finally:
                os._exit(EXIT_NOT_RUN)
        os.close(self.fd)


def _freeze_shared_objects():
    """The zygote's last start-up step: what it holds now is shared with every
    child; keeping the collector off these objects spares the children
    copying their pages when a collection would touch them."""
    gc.collect()
    gc.freeze()


def _import_serving_modules():
    """The modules the harness needs to run a request (results are JSON,
    exceptions become tracebacks, commands are subprocesses)."""
    global ctypes, functools, json, linecache, site, socket, subprocess, threading, traceback
    import ctypes
    import functools
    import json
    import linecache
    import site
    import socket
    import subprocess
    import threading
    import traceback


def _import_tighten():
    """castellan_tighten, when the first TIGHTEN arrives: a pool that never
    narrows an exec never pays for it. Imported from the harness's own
    directory only (user code never sees that directory on sys.path)."""
    global tighten
    if tighten is None:
        sys.path.insert(0, _HERE)
        try:
            import castellan_tighten
        finally:
            sys.path.remove(_HERE)
        tighten = castellan_tighten
    return tighten


def _import_clean():
    """castellan_clean, for the fork-mode zygote: imported from the
    harness's own directory, or already imported (by castellan-launcher's
    warm_up, whose directory is the host's, not the sandbox's)."""
    module = sys.modules.get("castellan_clean")
    if module is None:
        sys.path.insert(0, _HERE)
        try:
            import castellan_clean as module
        finally:
            sys.path.remove(_HERE)
    return module


def warm_up():
    """castellan-launcher's start-up (worker/warm_interpreter.cpp): what a
    worker would load after READY, loaded once in the launcher, whose forks
    start with it; then kept away from the collector, so that a worker does
    not copy those pages by collecting them.

    Not `threading`, nor `subprocess`, which imports it: threading registers
    an after-fork hook, which would run in every new worker before READY and
    cost more there (about 100 pages written, 3 ms on this kind of machine)
    than importing both after READY, while idle, as an exec'd worker does."""
    for name in ("ctypes", "functools", "json", "linecache", "site", "socket",
                 "traceback") + PRELOAD:
        _preloader(name)()
    _import_tighten()
    _import_clean()
    _freeze_shared_objects()
    if "threading" in sys.modules:
        raise RuntimeError("warm_up: threading was imported; its after-fork hook would "
                           "slow every worker's start")

EXIT_USAGE = 2
EXIT_BROKEN_WIRE = 3
EXIT_ZYGOTE_LOST = 4
EXIT_DUMPABLE = 5
EXIT_NO_EXEC_DOMAIN = 6
#: The exec's process, when it cannot enter its Landlock domain (its code
#: never runs), and a request refused by a retired worker: the same status
#: as a tightening that cannot be applied.
EXIT_NOT_RUN = 126

# prctl(2) options (include/uapi/linux/prctl.h).
_PR_GET_DUMPABLE = 3
_PR_SET_DUMPABLE = 4


def _make_undumpable():
    """Fork mode, the first step after the serving imports, in the harness
    and again in the zygote (each is its own process; execve made the
    harness dumpable again, and the zygote was forked before this step): a
    process that is not dumpable has its /proc/<pid> entries owned by root,
    and the kernel refuses ptrace-mode access to them (mem, maps, environ,
    fd, the fds behind them) to any process without CAP_SYS_PTRACE, which no
    process of the sandbox has. Runs before any user code exists; a process
    that cannot make itself non-dumpable exits rather than serve.

    Not in reuse mode: there the code runs in the harness itself, which has
    nothing to hide from it, and would only lose its own /proc/self/mem and
    environ (root-owned files of mode 0400/0600). The fork-mode exec's
    process, which inherits the flag, makes itself dumpable again once it is
    in its own Landlock domain (_ExecDomain.enter)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if (libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0
            or libc.prctl(_PR_GET_DUMPABLE, 0, 0, 0, 0) != 0):
        err = ctypes.get_errno()
        os.write(2, f"castellan-harness: cannot make pid {os.getpid()} non-dumpable: "
                    f"{os.strerror(err)}\n".encode())
        os._exit(EXIT_DUMPABLE)

#: Frames from these files are the harness's, never shown in a traceback, and
#: never interrupted by KeyboardInterrupt (see Harness._on_sigint).
HARNESS_FILES = frozenset(
    path
    for module in (sys.modules[__name__], wire, sys.modules.get("__main__"))
    for path in (getattr(module, "__file__", None),)
    if path is not None
    for path in (path, os.path.abspath(path))
) | {os.path.join(_HERE, "castellan_tighten.py")}

# Harness states (what the main thread is doing).
STARTING, IDLE, USER, COMMAND, FINISHING = range(5)


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


class _Terminate(BaseException):
    """Raised in the idle main loop by SIGINT: stop, dying of that signal."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _clean_text(text):
    """Text that encodes to UTF-8 (lone surrogates become \\udcxx escapes)."""
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


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


#: A fork-mode child's report: exit code, then the byte lengths of the
#: exception's type, message and traceback (-1 each: no exception) and of
#: the text for stderr (-1: none), then those bytes (UTF-8).
_REPORT = struct.Struct("<iiiii")

#: A fork-mode COMMAND's report, written only when the child's execve of
#: the program failed: its errno. A program that started has no report.
_EXEC_FAILURE = struct.Struct("<i")

#: The most a child's report may take: what a pipe holds by default, so
#: that it is written at once, with nobody reading yet.
_REPORT_MAX = 65536

#: The harness to the zygote: what to run (_RUN_CODE, or _RUN_COMMAND with
#: a COMMAND payload: the argv, each argument NUL-terminated), the length of
#: it and of the TIGHTEN payload (0: none) that follow, in that order.
_CODE_HEADER = struct.Struct("<III")
_RUN_CODE, _RUN_COMMAND = range(2)

#: The zygote to the harness, per exec: the child's pid (0: none was forked;
#: -1: fork failed, and the status is the errno), its wait status, the
#: length of its report, what became of a tightening (one of the _TIGHTENED
#: values), the length of its text and the length of the reason the worker
#: must retire (0: it need not); then the report, the text and the reason.
_ANSWER_HEADER = struct.Struct("<iiIIII")
_NOT_TIGHTENED, _TIGHTENED, _TIGHTEN_REFUSED = range(3)

#: waitpid(2): children of any kind, also those that exit without SIGCHLD.
_WALL = 0x40000000
_PR_SET_CHILD_SUBREAPER = 36


def _pack_report(exit_code, exception, exit_message, limit):
    """The report, at most `limit` bytes: the longest text is halved (and
    marked) until it fits, as send_result() does for the RESULT frame."""
    if exception is None and exit_message is None:
        return _REPORT.pack(exit_code, -1, -1, -1, -1)
    texts = {k: v.encode("utf-8", "backslashreplace") for k, v in (exception or {}).items()}
    if exit_message is not None:
        texts["exit_message"] = exit_message.encode("utf-8", "backslashreplace")
    while _REPORT.size + sum(len(t) for t in texts.values()) > limit:
        longest = max(texts, key=lambda k: len(texts[k]))
        text = texts[longest]
        texts[longest] = (text[:len(text) // 2].decode("utf-8", "ignore") +
                          "…[truncated]").encode("utf-8")
    order = ("type", "message", "traceback", "exit_message")
    lengths = [len(texts[k]) if k in texts else -1 for k in order]
    return _REPORT.pack(exit_code, *lengths) + b"".join(texts.get(k, b"") for k in order)


def _unpack_report(report):
    """(exit code, exception or None, stderr text or None) from a child's
    report, or None when it is not a well-formed one. The child ran user
    code: every length is checked against what arrived, every text must be
    UTF-8, and nothing in it is trusted beyond its shape."""
    if len(report) < _REPORT.size:
        return None
    exit_code, *lengths = _REPORT.unpack_from(report)
    if any(n < -1 for n in lengths) or len({n < 0 for n in lengths[:3]}) != 1:
        return None
    if _REPORT.size + sum(max(n, 0) for n in lengths) != len(report):
        return None
    texts = []
    offset = _REPORT.size
    try:
        for n in lengths:
            if n < 0:
                texts.append(None)
                continue
            texts.append(bytes(report[offset:offset + n]).decode("utf-8"))
            offset += n
    except UnicodeDecodeError:
        return None
    exception = None
    if texts[0] is not None:
        exception = {"type": texts[0], "message": texts[1], "traceback": texts[2]}
    return exit_code, exception, texts[3]


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


def _write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _writev_all(fd, parts):
    """Writes the buffers `parts` in order, as one writev when it can."""
    views = [memoryview(p).cast("B") for p in parts if len(p)]
    while views:
        done = os.writev(fd, views)
        while views and done >= len(views[0]):
            done -= len(views[0])
            views.pop(0)
        if views and done:
            views[0] = views[0][done:]


def _readinto_exact(fd, view):
    """Fills the writable memoryview `view` from a blocking fd; False at
    EOF before it is full. Reads straight into it: no bytes object holds
    what passed."""
    done = 0
    while done < len(view):
        n = os.readv(fd, [view[done:]])
        if n == 0:
            return False
        done += n
    return True


class Harness:
    def __init__(self, segment_fd, to_worker_fd, to_supervisor_fd, mode, control_fd=None):
        # Our own diagnostics go to the worker's stderr, not to the frames.
        self.diag_fd = os.dup(2)
        self.pid = os.getpid()
        self.mode = mode
        self.request_id = 0
        self.state = STARTING
        self.stop_signal = None
        self.main_ident = _thread.get_ident()
        self._pending_interrupt = False
        self._retriggered = False
        self.child = None
        self.in_forked_child = False
        #: Why this worker serves no further exec (fork mode: what an exec
        #: left could not be put back), or None. Sent with every RESULT from
        #: then on; the pool replaces a worker that says it.
        self.retired = None
        # (request id, payload, parsed description or TighteningError) of a
        # TIGHTEN frame, until the CODE frame it announces arrives.
        self.pending_tighten = None
        self.wire = wire.Wire(segment_fd, to_worker_fd, to_supervisor_fd,
                              on_broken=self._broken)
        for fd in (segment_fd, to_worker_fd, to_supervisor_fd):
            # The mapping and the pollers keep working; exec'd programs
            # (os.system, os.exec*) must not get the wire.
            os.set_inheritable(fd, False)
        self._stdin_to_devnull()
        self._libc = None  # the C library (fflush), loaded with the serving modules
        os.register_at_fork(after_in_child=self._after_fork_in_child)
        self.harness_main = sys.modules["__main__"]
        self.control_fd = control_fd
        self._start_threads()
        # Start-up after READY (see the module's doc): what serving needs
        # first, then the preload; each step runs only while nothing waits.
        self._serving_steps = [_import_serving_modules, _light_site,
                               self._load_libc, self._install_policy_denials,
                               self._snapshot_baseline]
        self._preload_steps = [_preloader(name) for name in PRELOAD]
        self.zygote = None
        if mode == "fork":
            # The harness runs no user code: it needs json (results), the C
            # library (COMMAND output) and nothing of the preload. What the
            # code needs is the zygote's (_zygote_main).
            self._zygote_steps = (self._serving_steps, self._preload_steps)
            self._serving_steps = [_import_serving_modules, _make_undumpable, self._load_libc]
            self._preload_steps = []
        self._snapshot_baseline()
        signal.signal(signal.SIGINT, self._on_sigint)
        self.out = self.err = None

    def _snapshot_baseline(self):
        """What _prepare restores before every request."""
        self.saved_path = list(sys.path)
        self.saved_environ = dict(os.environ)
        # The environment is compared at the C level (the bytes dict behind
        # os.environ) before every request: comparing the mapping itself
        # decodes every key and value, tens of microseconds per request.
        self.environ_obj = os.environ
        self.saved_environ_data = dict(os.environ._data)
        self.saved_recursion_limit = sys.getrecursionlimit()
        self.saved_warning_filters = list(warnings.filters)
        try:
            self.saved_cwd = os.getcwd()
        except OSError:
            self.saved_cwd = None

    def _start_threads(self):
        """The fd 1/2 pumps and the SIGINT re-trigger thread, started before
        READY: the pool counts a ready worker's tasks, and more after an exec
        means the exec left something running. Plain _thread threads, so
        that `threading` (~6 ms to import) is not needed for READY; they
        are daemonic, and user code does not see them in threading.enumerate().
        In fork mode the harness runs no user code: no re-trigger thread, and
        it drains the pipes itself while it waits for the zygote."""
        threaded = self.mode != "fork"
        self._retrigger_r = self._retrigger_w = None
        if threaded:
            self._retrigger_r, self._retrigger_w = os.pipe()
            os.set_blocking(self._retrigger_w, False)
            _thread.start_new_thread(self._retrigger_loop, ())
        self.pumps = [_Pump(self, 1, wire.STDOUT, threaded),
                      _Pump(self, 2, wire.STDERR, threaded)]

    def _load_libc(self):
        self._libc = ctypes.CDLL(None)

    def _install_policy_denials(self):
        if self.control_fd is None:
            return
        try:
            PolicyDenials(self.control_fd).install()
        except OSError as e:
            self.diag(f"control socket: {e.strerror}")

    def _start_up_step(self, serving_only):
        """Runs the next start-up step; False when there is none left (of the
        serving steps only, if `serving_only`)."""
        if self._serving_steps:
            self._serving_steps.pop(0)()
            return True
        if serving_only or not self._preload_steps:
            return False
        self._preload_steps.pop(0)()
        return True

    # --- diagnostics and exits ------------------------------------------------

    def diag(self, message):
        try:
            os.write(self.diag_fd, f"castellan-harness: {message}\n".encode("utf-8", "replace"))
        except OSError:
            pass

    def _broken(self, message):
        # Exits at once: user code on the stack must not be able to catch it.
        self.diag(f"broken wire: {message}")
        os._exit(EXIT_BROKEN_WIRE)

    def _die_of(self, signum):
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # not reached

    def _after_fork_in_child(self):
        self.in_forked_child = True

    # --- signals -----------------------------------------------------------------

    def _on_sigint(self, signum, frame):
        if self.in_forked_child:
            raise KeyboardInterrupt
        retriggered, self._retriggered = self._retriggered, False
        state = self.state
        if state == USER:
            if _inside_harness_code(frame):
                # In the middle of our own code (a print on its way to the
                # wire): a KeyboardInterrupt here could leave a frame
                # half-sent or make the BufferedWriter above send a chunk
                # twice. Raise it at the next safe point instead: the start
                # of the next write, or back in user code, where a helper
                # thread sends the signal again shortly.
                self._pending_interrupt = True
                try:
                    if self._retrigger_w is not None:
                        os.write(self._retrigger_w, b"!")
                except OSError:
                    pass
                return
            self._pending_interrupt = False
            raise KeyboardInterrupt
        self._pending_interrupt = False
        if retriggered:
            return  # the request it was meant for has ended
        if state == COMMAND:
            child = self.child
            if child is not None:
                try:
                    child.send_signal(signum)
                except OSError:
                    pass
            return
        self.stop_signal = signum
        if state == IDLE:
            raise _Terminate(signum)

    def _retrigger_loop(self):
        # A thread of its own, woken through a pipe: the signal handler
        # must neither start threads nor take Python-level locks.
        while True:
            os.read(self._retrigger_r, 64)
            time.sleep(0.002)
            if self._pending_interrupt:
                self._retriggered = True
                # A real signal, so that a blocking call in user code (a
                # sleep) is interrupted too.
                signal.pthread_kill(self.main_ident, signal.SIGINT)

    def take_pending_interrupt(self):
        """Raises the deferred KeyboardInterrupt if one is due and this is
        the main thread running user code (called where raising is safe)."""
        if (self._pending_interrupt and self.state == USER
                and _thread.get_ident() == self.main_ident):
            self._pending_interrupt = False
            raise KeyboardInterrupt

    # --- per-request environment ---------------------------------------------------

    def _stdin_to_devnull(self):
        try:
            fd = os.open(os.devnull, os.O_RDONLY)
        except OSError:
            return
        if fd != 0:
            os.dup2(fd, 0)
            os.close(fd)

    def _make_writer(self, mtype, fd, errors):
        raw = _FrameRaw(self, mtype, fd)
        buffered = io.BufferedWriter(raw, buffer_size=wire.STREAM_CHUNK)
        return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, newline="\n",
                                line_buffering=False, write_through=False)

    def _prepare(self, request_id):
        """A clean process state for the next request: fresh stdio writers,
        fd 1/2 on the pumps, and what user code may have changed restored."""
        self.request_id = request_id
        for pump in self.pumps:
            try:
                pump.restore()
            except OSError as e:
                self.diag(f"cannot restore fd {pump.target_fd}: {e.strerror}")
        self.out = self._make_writer(wire.STDOUT, 1, "surrogateescape")
        self.err = self._make_writer(wire.STDERR, 2, "backslashreplace")
        sys.stdout = sys.__stdout__ = self.out
        sys.stderr = sys.__stderr__ = self.err
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.argv = ["<exec>"]
        sys.path[:] = self.saved_path
        sys.settrace(None)
        sys.setprofile(None)
        sys.setrecursionlimit(self.saved_recursion_limit)
        warnings.filters[:] = self.saved_warning_filters
        if hasattr(warnings, "_filters_mutated"):
            warnings._filters_mutated()  # drops the caches of the old filters
        warnings.showwarning = _original_showwarning
        self._pending_interrupt = False
        if os.environ is not self.environ_obj or self.environ_obj._data != self.saved_environ_data:
            os.environ = self.environ_obj
            os.environ.clear()
            os.environ.update(self.saved_environ)
        if self.saved_cwd is not None:
            try:
                os.chdir(self.saved_cwd)
            except OSError:
                pass
        signal.signal(signal.SIGINT, self._on_sigint)

    def _collect_output(self):
        """Pushes every byte of the request's output onto the wire: our
        writers (unless user code closed them), C stdio buffers, then the
        fd pipes."""
        for writer in (self.out, self.err):
            try:
                if writer is not None and not writer.closed:
                    writer.flush()
            except Exception:
                pass
        try:
            self._libc.fflush(None)
        except Exception:
            pass
        for pump in self.pumps:
            with pump.lock:
                pump.drain()

    # --- results -----------------------------------------------------------------------

    def send_json(self, mtype, request_id, body):
        payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
        self.wire.send(mtype, request_id, payload)

    def send_result(self, request_id, exit_code, exception, extra=None):
        """RESULT, with the exception's strings shortened until it fits one
        frame (a ring of 4 KiB still gets a readable result). `extra` adds
        fields (the tightening report, a refusal)."""
        if self.retired is not None:
            extra = dict(extra or {}, retire=self.retired)
        if exception is None and not extra:
            # What json.dumps gives for this body, without the encoder.
            self.wire.send(wire.RESULT, request_id,
                           b'{"exit_code": %d, "exception": null}' % exit_code)
            return
        limit = self.wire.writer.max_payload
        body = {"exit_code": exit_code, "exception": exception}
        if extra:
            body.update(extra)
        while True:
            payload = json.dumps(body, ensure_ascii=False).encode("utf-8")
            if len(payload) <= limit or exception is None:
                break
            longest = max(exception, key=lambda k: len(exception[k]))
            text = exception[longest]
            exception[longest] = text[:len(text) // 2] + "…[truncated]"
        self.wire.send(wire.RESULT, request_id, payload)

    def _send_exec_failure(self, request_id, program, status, errno):
        """RESULT of a COMMAND whose program never ran, with `status` (exit
        code and the line for stderr, from _exec_failure_status). When the
        harness's own execve of it failed (`errno` not None), the RESULT
        says so in `exec_error` (docs/wire.md): the pool explains the
        failure from that field, never from the stderr line, which the
        program itself could have written had it run."""
        exit_code, reason = status
        self._send_stderr(f"castellan: {program}: {reason}\n")
        extra = None if errno is None else {"exec_error": {"program": program, "errno": errno}}
        self.send_result(request_id, exit_code, None, extra)

    def _send_stderr(self, text):
        self.wire.send_stream(wire.STDERR, self.request_id,
                              text.encode("utf-8", "backslashreplace"))

    # --- CODE ----------------------------------------------------------------------------

    def _execute(self, source, main):
        """Compiles and runs `source` in the module `main`; returns (exit
        code, exception description or None, SystemExit message or None)."""
        try:
            try:
                code = compile(source, "<exec>", "exec", dont_inherit=True)
                self.state = USER
                exec(code, main.__dict__)
            finally:
                self.state = FINISHING
                # An interrupt deferred past the end of the code is void.
                self._pending_interrupt = False
        except SystemExit as e:
            exit_code, exit_message = _system_exit_code(e)
            return exit_code, None, exit_message
        except BaseException as e:  # noqa: B902 — everything user code raises is reported
            return 1, _describe_exception(e), None
        return 0, None, None

    def run_code(self, request_id, source):
        self._prepare(request_id)
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        text = source.decode("utf-8", "replace")
        # Tracebacks show the source lines of '<exec>' frames.
        linecache.cache["<exec>"] = (len(text), None, text.splitlines(True), "<exec>")
        sys.modules["__main__"] = main
        exit_code, exception, exit_message = self._execute(source, main)
        self.state = FINISHING
        if self.in_forked_child:
            # User code forked and this is the child finishing the code:
            # it must not touch the wire. Output went to fd 1/2 (the pumps).
            for writer in (sys.stdout, sys.stderr):
                try:
                    writer.flush()
                except Exception:
                    pass
            if exit_message is not None:
                os.write(2, exit_message.encode("utf-8", "backslashreplace"))
            os._exit(exit_code & 0xFF)
        sys.modules["__main__"] = self.harness_main
        del main
        self._collect_output()
        if exit_message is not None:
            self._send_stderr(exit_message)
        self.send_result(request_id, exit_code, exception)

    # --- COMMAND -------------------------------------------------------------------------

    def run_command(self, request_id, payload):
        if not payload.endswith(b"\0"):
            self.wire.broken("COMMAND payload does not end with a NUL byte")
        argv = payload[:-1].split(b"\0")
        self._prepare(request_id)
        program = argv[0].decode("utf-8", "backslashreplace")
        if not argv[0]:
            self._send_stderr("castellan: empty program name\n")
            self.send_result(request_id, 127, None)
            return
        try:
            self.child = subprocess.Popen(argv, stdin=subprocess.DEVNULL,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          close_fds=True, bufsize=0)
        except OSError as e:
            # subprocess names the program in the error only when its execve
            # failed (a failed fork or set-up before the exec names none).
            failed_exec = e.filename is not None and bool(e.errno)
            self._send_exec_failure(request_id, program, _exec_failure_status(e),
                                    e.errno if failed_exec else None)
            return
        child = self.child
        self.state = COMMAND
        try:
            self._pump_child(child)
            returncode = child.wait()
        finally:
            self.state = FINISHING
            self.child = None
        exit_code = returncode if returncode >= 0 else 128 - returncode
        self._collect_output()
        self.send_result(request_id, exit_code, None)

    def _pump_child(self, child):
        """Streams the child's stdout/stderr as frames until both pipes close,
        or until the child has exited and its pipes hold nothing more (a
        grandchild that keeps them open does not hold the result back)."""
        streams = {child.stdout.fileno(): wire.STDOUT, child.stderr.fileno(): wire.STDERR}
        poller = select.poll()
        for fd in streams:
            os.set_blocking(fd, False)
            poller.register(fd, select.POLLIN)
        exited = False
        while streams:
            events = poller.poll(50)
            for fd, _ in events:
                self._drain_child_fd(fd, streams, poller)
            if not events and exited:
                break
            if not exited and child.poll() is not None:
                exited = True  # one more round to collect what is buffered
        for fd in list(streams):
            self._drain_child_fd(fd, streams, poller)
        child.stdout.close()
        child.stderr.close()

    def _drain_child_fd(self, fd, streams, poller):
        mtype = streams.get(fd)
        if mtype is None:
            return
        while True:
            try:
                data = os.read(fd, wire.STREAM_CHUNK)
            except BlockingIOError:
                return
            if not data:
                poller.unregister(fd)
                del streams[fd]
                return
            self.wire.send_stream(mtype, self.request_id, data)

    # --- the loop ------------------------------------------------------------------------

    # --- CODE in a forked child (fork mode) -------------------------------------------

    def _start_zygote(self):
        """Forks the zygote, before READY: the pool counts it among the
        worker's tasks when idle. It keeps stdio (fd 1/2 are the pipes the
        harness drains), its two pipes to the harness and the control
        socket, and nothing of the wire."""
        ctl_r, ctl_w = os.pipe()
        answer_r, answer_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                keep = {0, 1, 2, ctl_r, answer_w}
                if self.control_fd is not None:
                    keep.add(self.control_fd)
                self._close_all_but(keep)
                self._zygote_main(ctl_r, answer_w)
            finally:
                os._exit(0)
        os.close(ctl_r)
        os.close(answer_w)
        pidfd = os.pidfd_open(pid)
        self.zygote = (pidfd, ctl_w, answer_r)
        self.fork_poller = select.poll()
        self.pump_by_fd = {}
        for pump in self.pumps:
            self.fork_poller.register(pump.read_fd, select.POLLIN)
            self.pump_by_fd[pump.read_fd] = pump
        self.fork_poller.register(pidfd, select.POLLIN)
        self.fork_poller.register(answer_r, select.POLLIN)

    def run_command_forked(self, request_id, payload):
        """A fork-mode COMMAND: run by a child of the zygote, like CODE, so
        that it gets the same exec domain, the same subreaper and the same
        clean-up afterwards."""
        if not payload.endswith(b"\0"):
            self.wire.broken("COMMAND payload does not end with a NUL byte")
        if payload.startswith(b"\0"):
            self.request_id = request_id
            self._send_stderr("castellan: empty program name\n")
            self.send_result(request_id, 127, None)
            return
        self.run_code_forked(request_id, payload, None, _RUN_COMMAND)

    def run_code_forked(self, request_id, source, tightening=None, kind=_RUN_CODE):
        """The harness's side of a fork-mode CODE: the code (and the raw
        TIGHTEN payload) to the zygote, the child's fd 1/2 output to the
        wire while it runs, then RESULT from the zygote's answer."""
        self.request_id = request_id
        zygote_pidfd, ctl_w, answer_r = self.zygote
        poller = self.fork_poller
        pumps = self.pump_by_fd
        # Bytes written after the last RESULT belong to no exec.
        for fd, _ in poller.poll(0):
            if fd in pumps:
                pumps[fd].forward(send=False)
        narrowing = b"" if tightening is None else tightening
        try:
            # No concatenation: a joined copy of the code would stay behind
            # in this process's heap (the frame's own buffer is scrubbed).
            _writev_all(ctl_w, [_CODE_HEADER.pack(kind, len(source), len(narrowing)), source,
                                narrowing])
        except OSError:
            self._zygote_lost()
        answer = bytearray()
        need = _ANSWER_HEADER.size
        while len(answer) < need:
            for fd, _ in poller.poll():
                if fd == answer_r:
                    chunk = os.read(answer_r, 1 << 20)
                    if not chunk:
                        self._zygote_lost()
                    answer += chunk
                    if len(answer) >= _ANSWER_HEADER.size:
                        _, _, report_size, _, text_size, retire_size = \
                            _ANSWER_HEADER.unpack_from(answer)
                        need = _ANSWER_HEADER.size + report_size + text_size + retire_size
                elif fd == zygote_pidfd:
                    self._zygote_lost()
                else:
                    pumps[fd].forward()
        # The child has been reaped: all it wrote to fd 1/2 is in the pipes
        # (and what a process it forked wrote before that).
        for fd, _ in poller.poll(0):
            if fd in pumps:
                pumps[fd].forward()
        child, status, report_size, narrowed, text_size, retire_size = \
            _ANSWER_HEADER.unpack_from(answer)
        start = _ANSWER_HEADER.size
        report = answer[start:start + report_size]
        start += report_size
        text = bytes(answer[start:start + text_size]).decode("utf-8", "replace")
        start += text_size
        if retire_size:
            # Whatever this exec's result, no later one may run here.
            self.retired = bytes(answer[start:start + retire_size]).decode("utf-8", "replace")
        if child == 0 and retire_size and narrowed == _NOT_TIGHTENED:
            self._refuse_retired(request_id)
            return
        if narrowed == _TIGHTEN_REFUSED:
            self._refuse(request_id, text)
            return
        if child < 0:
            message = os.strerror(status)
            self._send_stderr(f"castellan: cannot fork the exec's process: {message}\n")
            self.send_result(request_id, 1, {"type": "OSError", "message": message,
                                             "traceback": ""})
            return
        exit_code, exception, exit_message = 1, None, None
        extra = None
        if kind == _RUN_COMMAND:
            # Only the harness's own code, before the exec, writes a
            # COMMAND's report (_child_exec): no user code has run there.
            unpacked = None
            if len(report) == _EXEC_FAILURE.size:
                failed_exec = _EXEC_FAILURE.unpack_from(report)[0]
                if failed_exec > 0:
                    program = bytes(source).split(b"\0", 1)[0].decode("utf-8", "backslashreplace")
                    extra = {"exec_error": {"program": program, "errno": failed_exec}}
        else:
            unpacked = _unpack_report(report) if report else None
        if unpacked is not None:
            exit_code, exception, exit_message = unpacked
        elif os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            exit_code = 128 + sig
            if kind == _RUN_CODE:
                exit_message = f"castellan: the exec's process was killed by signal {sig}\n"
        elif os.WIFEXITED(status):
            # os._exit() in the code: its status is the exec's exit code.
            exit_code = os.WEXITSTATUS(status)
        if narrowed == _TIGHTENED:
            try:
                extra = {"tightening": json.loads(text)}
            except ValueError:
                self._refuse(request_id, "the zygote's tightening report is unreadable")
                return
        if exit_message is not None:
            self._send_stderr(exit_message)
        self.send_result(request_id, exit_code, exception, extra)

    def _zygote_lost(self):
        # The code can signal its parent, the zygote: that ends this worker
        # only, which the pool then replaces.
        self.diag("fork mode: the zygote is gone")
        os._exit(EXIT_ZYGOTE_LOST)

    def _refuse_retired(self, request_id):
        """RESULT for a request that did not run because the worker retired."""
        self.send_result(request_id, EXIT_NOT_RUN, None,
                         {"refused": f"this worker retired: {self.retired}"})

    def _refuse(self, request_id, reason):
        """RESULT for a request whose code did not run because its
        per-request tightening could not be applied."""
        self.send_result(request_id, tighten.EXIT_REFUSED, None,
                         {"refused": f"per-request tightening: {reason}"})

    def _take_tightening(self, request_id):
        """The TIGHTEN frame announced for `request_id` (None without one),
        as (its payload, the parsed description or TighteningError); the
        frame must come right before its CODE."""
        pending, self.pending_tighten = self.pending_tighten, None
        if pending is None:
            return None
        if pending[0] != request_id:
            self.wire.broken(f"TIGHTEN for request {pending[0]} followed by request {request_id}")
        return pending[1:]

    # The zygote ----------------------------------------------------------------

    @staticmethod
    def _close_all_but(keep):
        """Closes every fd not in `keep`: the zygote holds nothing of the
        wire (the segment's fd, mmap's own duplicate of it, the doorbells),
        nor the pipes' read ends, nor anything else the harness opened.
        With close_range, not by listing /proc/self/fd: a worker started
        warm is not dumpable from its start, and where the supervisor
        decides opens it would open that directory for the zygote as the
        worker's uid, which a non-dumpable process's fd directory (root's,
        mode 0500) refuses."""
        low = 0
        for fd in sorted(keep) + [None]:
            if fd is None:
                os.closerange(low, 1 << 20)
            elif fd > low:
                os.closerange(low, fd)
            if fd is not None:
                low = max(low, fd + 1)

    def _drop_wire_mapping(self):
        """The zygote's first step: unmaps the segment (the harness's
        objects still refer to it, but nothing in the zygote or a child
        touches them), so that no child can write frames."""
        seg = self.wire.segment.map
        base = ctypes.addressof(ctypes.c_char.from_buffer(seg))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.munmap.argtypes = (ctypes.c_void_p, ctypes.c_size_t)
        if libc.munmap(base, len(seg)) != 0:
            # Do not fork children that could reach the wire.
            os._exit(EXIT_BROKEN_WIRE)

    def _make_exec_domain(self):
        """The ruleset of the Landlock domain each exec's process enters."""
        self.exec_domain = _ExecDomain()

    def _prepare_put_back(self):
        """What _put_back needs: the zygote becomes the subreaper of every
        process an exec starts, and the cleaner learns the sandbox's
        writable mounts; the buffers code and reports pass through."""
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
            self._unclean = ("the zygote cannot become a subreaper: "
                             f"{os.strerror(ctypes.get_errno())}")
        self.cleaner = _import_clean().Cleaner(self.control_fd)

    def _prepare_children(self):
        """The zygote, once: the process state every child starts from, so
        that no child makes it (after a fork each page a process writes
        first costs a fault, on some hypervisors a costly one, and replacing
        sys.stdout in a child would even run the old stream's finalizer
        there): fresh stdio writers on fd 1/2, an empty stdin, argv, the
        __main__ the code runs in, C stdout unbuffered (a child ends with
        os._exit(), which flushes no C buffer, and an fflush through ctypes
        in every child would cost more than an unbuffered printf now and
        then)."""
        self.out = self._make_writer(wire.STDOUT, 1, "surrogateescape")
        self.err = self._make_writer(wire.STDERR, 2, "backslashreplace")
        sys.stdout = sys.__stdout__ = self.out
        sys.stderr = sys.__stderr__ = self.err
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.argv = ["<exec>"]
        self.fork_main = types.ModuleType("__main__")
        self.fork_main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = self.fork_main
        self.c_stdout_unbuffered = False
        try:
            stdout = ctypes.c_void_p.in_dll(self._libc, "stdout")
            self._libc.setvbuf(stdout, None, 2, 0)  # _IONBF
            self.c_stdout_unbuffered = True
        except (ValueError, AttributeError, OSError):
            pass

    def _zygote_main(self, ctl_r, answer_w):
        """The zygote: its start-up steps while no code waits (what a child
        needs first, then the preload and the freeze), then per code
        received a child forked to run it, reaped, answered."""
        serving, preload = self._zygote_steps
        # What a child needs before it may run: the imports serving needs,
        # the site directories, the C library, the wrapped open(), the state
        # it starts from. Non-dumpable (the zygote was forked dumpable) and
        # without the wire first.
        self._unclean = None
        self._code_header = bytearray(_CODE_HEADER.size)
        self._code_buffer = bytearray(65536)
        self._report_buffer = bytearray(_REPORT_MAX)
        serving = [_import_serving_modules, _make_undumpable, self._drop_wire_mapping,
                   self._make_exec_domain, self._prepare_put_back] + [
            step for step in serving if step is not _import_serving_modules
        ] + [self._prepare_children]
        preload = preload + [_freeze_shared_objects]
        poller = select.poll()
        poller.register(ctl_r, select.POLLIN)
        while True:
            while (serving or preload) and not poller.poll(0):
                (serving or preload).pop(0)()
            message = self._receive_code(ctl_r)
            if message is None:
                os._exit(0)
            while serving:
                serving.pop(0)()
            self._run_child(ctl_r, answer_w, *message)

    def _receive_code(self, ctl_r):
        """The next code and TIGHTEN payload from the harness (see
        _CODE_HEADER) as views of the zygote's code buffer, None at EOF.
        Read straight into that buffer, which _run_child zeroes once the
        exec is over: no other copy of the code is made in the zygote, whose
        memory every later child starts from."""
        header = self._code_header
        if not _readinto_exact(ctl_r, memoryview(header)):
            return None
        kind, code_size, narrowing_size = _CODE_HEADER.unpack_from(header)
        need = code_size + narrowing_size
        if len(self._code_buffer) < need:
            # A new, larger buffer (zeroed by the allocator); the old one was
            # zeroed after its last use.
            self._code_buffer = bytearray(max(need, 2 * len(self._code_buffer)))
        view = memoryview(self._code_buffer)[:need]
        if not _readinto_exact(ctl_r, view):
            return None
        return kind, view[:code_size], view[code_size:]

    def _run_child(self, ctl_r, answer_w, kind, source, narrowing):
        """One exec in the zygote: forks the child, waits for it only (a
        process it forked may outlive it, and makes the pool replace the
        worker), answers with its report. Kept to the bare calls: every page
        the zygote writes while the child lives is copied on a fault."""
        prepared = None
        if self._unclean is not None:
            # What an earlier exec left could not be put back: no code runs
            # here any more (the harness stops sending any; this is the
            # second lock).
            self._scrub_code(source, narrowing)
            self._answer(answer_w, 0, 0, b"", _NOT_TIGHTENED, "", self._unclean)
            return
        if narrowing:
            # Built here, not in the child: every page the child touches is
            # copied, the zygote's are its own.
            t = _import_tighten()
            try:
                prepared = t.prepare(t.parse(narrowing))
            except t.TighteningError as e:
                self._scrub_code(source, narrowing)
                self._answer(answer_w, 0, 0, b"", _TIGHTEN_REFUSED, str(e))
                return
        status_r = status_w = None
        if prepared is not None:
            status_r, status_w = os.pipe()
        # Non-blocking at both ends: the child never blocks on its report
        # (one that does not fit is cut), and the zygote reads it in one go
        # once the child is gone.
        report_r, report_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            pid = os.fork()
        except OSError as e:
            for fd in (report_r, report_w, status_r, status_w):
                if fd is not None:
                    os.close(fd)
            if prepared is not None:
                prepared.close()
            self._scrub_code(source, narrowing)
            self._answer(answer_w, -1, e.errno or 0, b"", _NOT_TIGHTENED, "")
            return
        if pid == 0:
            # The exec's process: its stdio, argv, __main__ and the rest of
            # the process state are as the zygote set them up (no user code
            # ran in it).
            try:
                os.close(ctl_r)
                os.close(answer_w)
                os.close(report_r)
                self.exec_domain.enter()  # exits unless it entered
                if kind == _RUN_COMMAND:
                    self._child_exec(source, report_w)  # never returns
                if prepared is not None:
                    os.close(status_r)
                    tighten.in_child(prepared, status_w)  # exits unless all of it applied
                self._child_run(source, report_w)  # never returns
            finally:
                os._exit(1)
        os.close(report_w)
        if prepared is not None:
            # No later exec's process may inherit the ruleset.
            prepared.close()
            os.close(status_w)
        status = os.waitpid(pid, 0)[1]
        # Zeroed once the child is gone (its pages are the zygote's alone
        # again, so this copies nothing): the next child must not find them.
        self._scrub_code(source, narrowing)
        del source, narrowing
        report = memoryview(self._report_buffer)
        try:
            report = report[:os.readv(report_r, [report])]
        except BlockingIOError:
            report = report[:0]  # it ended before it reported
        os.close(report_r)
        narrowed, text = _NOT_TIGHTENED, ""
        if status_r is not None:
            try:
                narrowed, text = _TIGHTENED, json.dumps(tighten.outcome(status_r))
            except tighten.TighteningError as e:
                narrowed, text = _TIGHTEN_REFUSED, str(e)
            finally:
                os.close(status_r)
        self._put_back()
        try:
            self._answer(answer_w, pid, status, report, narrowed, text, self._unclean)
        finally:
            report[:] = bytes(len(report))

    def _scrub_code(self, source, narrowing):
        """Zeroes the code buffer where this exec's code and TIGHTEN were."""
        n = len(source) + len(narrowing)
        memoryview(self._code_buffer)[:n] = bytes(n)

    def _put_back(self):
        """After the exec's process: reaps what it left (the zygote is their
        subreaper, so every process the exec started ends up a child of the
        zygote); with none left running, puts the worker back as the exec
        found it (castellan_clean). Otherwise, or if that fails, the worker
        is unclean for good: `_unclean` says why, and it goes to the harness
        with this answer, which retires the worker."""
        if self._unclean is not None:
            return
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG | _WALL)
            except ChildProcessError:
                break  # no process of the exec is left
            if pid == 0:
                self._unclean = "a process the exec started is still running"
                return
        self._unclean = self.cleaner.clean()

    @staticmethod
    def _answer(answer_w, pid, status, report, narrowed, text, retire=None):
        data = text.encode("utf-8", "backslashreplace")
        reason = b"" if retire is None else retire.encode("utf-8", "backslashreplace")
        _writev_all(answer_w, [_ANSWER_HEADER.pack(pid, status, len(report), narrowed, len(data),
                                                   len(reason)), report, data, reason])

    def _child_exec(self, payload, report_w):
        """The forked child of a COMMAND: execs the program (found on PATH)
        with fd 0 on /dev/null and fd 1/2 on the pipes the harness drains,
        nothing else open, default SIGPIPE/SIGXFSZ (as subprocess leaves
        them); a program that cannot be started is reported on fd 2 with 127
        (not found) or 126, in the words run_command uses, and, when the
        execve itself failed, its errno on `report_w` (_EXEC_FAILURE), which
        is close-on-exec: a program that did start never holds it."""
        argv = bytes(payload)[:-1].split(b"\0")
        program = argv[0].decode("utf-8", "backslashreplace")
        failed_exec = None
        try:
            if self.control_fd is not None:
                os.set_inheritable(self.control_fd, False)
            for signum in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(signum, signal.SIG_DFL)
            try:
                os.execvp(argv[0], argv)
            except OSError as e:
                failed_exec = e.errno
                raise
        except BaseException as e:  # noqa: B902 — nothing may unwind into the zygote's code
            code, reason = _exec_failure_status(e)
        try:
            os.write(2, f"castellan: {program}: {reason}\n".encode("utf-8", "backslashreplace"))
            if failed_exec:
                os.write(report_w, _EXEC_FAILURE.pack(failed_exec))
        finally:
            os._exit(code)

    def _child_run(self, source, result_w):
        """The forked child: runs the code and reports (exit code, exception)
        on `result_w` (see _REPORT). Its stdout/stderr writers already go to
        fd 1/2 (in_forked_child), which the harness drains."""
        me = os.getpid()
        source = bytes(source)  # this process's own copy (the view is the zygote's buffer)
        text = source.decode("utf-8", "replace")
        linecache.cache["<exec>"] = (len(text), None, text.splitlines(True), "<exec>")
        exit_code, exception, exit_message = self._execute(source, self.fork_main)
        try:
            writers = [self.out, self.err]
            for writer in (sys.stdout, sys.stderr):
                if writer is not self.out and writer is not self.err:
                    writers.append(writer)  # the code's own: flushed too
            for writer in writers:
                try:
                    if writer is not None and not writer.closed:
                        writer.flush()
                except Exception:
                    pass
            if not self.c_stdout_unbuffered:
                try:
                    self._libc.fflush(None)
                except Exception:
                    pass
            if os.getpid() != me:
                # A process the code forked, returning from it: only the
                # exec's own process reports.
                if exit_message is not None:
                    os.write(2, exit_message.encode("utf-8", "backslashreplace"))
                os._exit(exit_code & 0xFF)
            # Non-blocking (see _run_child): written in one go, or cut short
            # if the code filled the pipe itself.
            os.write(result_w, _pack_report(exit_code, exception, exit_message, _REPORT_MAX))
        finally:
            os._exit(0)

    def serve(self):
        if self.mode == "fork":
            self._start_zygote()
        self._send_ready()
        if self.mode == "oneshot":
            self._preload_steps.clear()
        while True:
            if self.stop_signal is not None:
                self._die_of(self.stop_signal)
            self.state = IDLE
            try:
                # While start-up steps remain, look for a request between
                # them instead of blocking.
                frame = self.wire.receive(block=False)
                while frame is None and self._start_up_step(serving_only=False):
                    frame = self.wire.receive(block=False)
                if frame is None:
                    frame = self.wire.receive()
                self.state = FINISHING
                while self._start_up_step(serving_only=True):
                    pass
            except _Terminate as t:
                self._die_of(t.signum)
            mtype, request_id, payload = frame
            if mtype == wire.TIGHTEN:
                if self.pending_tighten is not None:
                    self.wire.broken("two TIGHTEN frames without a CODE between them")
                _import_tighten()
                try:
                    parsed = tighten.parse(payload)
                except tighten.TighteningError as e:
                    parsed = e
                self.pending_tighten = (request_id, payload, parsed)
                continue
            tightening = self._take_tightening(request_id) \
                if mtype in (wire.CODE, wire.COMMAND) else None
            if tightening is not None:
                narrowing, tightening = tightening
            if tightening is not None and (mtype != wire.CODE or self.mode != "fork"):
                # Only a process forked for the exec can be narrowed: the warm
                # interpreter of reuse mode would keep the restrictions.
                self._refuse(request_id, "only a CODE request in fork mode can be narrowed "
                             f"(this is a {'COMMAND' if mtype == wire.COMMAND else 'CODE'} "
                             f"request in {self.mode} mode)")
            elif self.retired is not None and mtype in (wire.CODE, wire.COMMAND):
                self._refuse_retired(request_id)
            elif tightening is not None and isinstance(tightening, tighten.TighteningError):
                self._refuse(request_id, str(tightening))
            elif mtype == wire.CODE and self.mode == "fork":
                # The zygote prepares and applies the tightening; it gets the
                # frame's payload, which the harness has just checked.
                self.run_code_forked(request_id, payload,
                                     narrowing if tightening is not None else None)
            elif mtype == wire.CODE:
                self.run_code(request_id, payload)
            elif mtype == wire.COMMAND and self.mode == "fork":
                self.run_command_forked(request_id, payload)
            elif mtype == wire.COMMAND:
                self.run_command(request_id, payload)
            elif mtype == wire.SHUTDOWN:
                os._exit(0)
            else:
                self.wire.broken(f"unexpected frame type {mtype:#04x} with no check pending")
            if mtype == wire.CODE:
                wire.scrub(payload)
            if self.mode == "oneshot":
                os._exit(0)

    def _send_ready(self):
        """READY, written out by hand: json is not imported yet. The
        enforcement report is castellan-worker's JSON object, passed through."""
        enforcement = _ENFORCEMENT
        if enforcement is not None and not (enforcement.startswith("{")
                                            and enforcement.endswith("}")):
            enforcement = '{"error": "unreadable enforcement report"}'
        body = '{"pid": %d, "interpreter": "%d.%d.%d", "mode": "%s"%s}' % (
            os.getpid(), *sys.version_info[:3], self.mode,
            "" if enforcement is None else ', "enforcement": ' + enforcement)
        self.wire.send(wire.READY, 0, body.encode("utf-8"))


_original_showwarning = warnings.showwarning


def _inside_harness_code(frame):
    """True if `frame`, or a caller below the exec() of user code, is the
    harness's own code (the wire, a stdio writer, the signal handler)."""
    while frame is not None:
        code = frame.f_code
        if code is Harness._execute.__code__:
            return False  # reached the exec() boundary: user code was running
        if code.co_filename in HARNESS_FILES:
            return True
        frame = frame.f_back
    return False


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


class PolicyDenials:
    """The details of the system calls the supervisor denied, read from the
    control socket (docs/wire.md, "Denials"). The supervisor writes each one
    before it answers the call, so when a call fails with EACCES its record
    is already here. A PermissionError raised by the wrapped functions then
    names the policy and the rule; the errno stays what the kernel said."""

    _KEEP = 64

    def __init__(self, fd):
        self._sock = socket.socket(fileno=fd)
        self._sock.setblocking(False)
        self._recent = []

    def _drain(self):
        while True:
            try:
                data = self._sock.recv(8192)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            if not data:
                return
            parts = data.split(b"\0")
            if len(parts) != 6 or parts[0] != b"DENY":
                continue
            self._recent.append([p.decode("utf-8", "backslashreplace") for p in parts[1:]])
            del self._recent[:-self._KEEP]

    # The calls behind the socket methods that raise without a file name:
    # only their own records explain them.
    _SOCKET_CALLS = {
        "connect": ("connect",),
        "bind": ("bind",),
        "sendto": ("sendto",),
        "sendmsg": ("sendmsg", "sendmmsg"),
    }

    def explain(self, error, syscalls=None):
        """A PermissionError naming the policy and rule behind `error`, or None.
        A record matches by path (either of the call's two names), or, for a
        call without a name (a socket), by system call."""
        self._drain()
        names = []
        for name in (error.filename, getattr(error, "filename2", None)):
            if isinstance(name, bytes):
                name = name.decode("utf-8", "backslashreplace")
            if name is not None:
                names.append(os.fspath(name) if not isinstance(name, int) else str(name))
        for i in range(len(self._recent) - 1, -1, -1):
            syscall, path, policy, rule, err = self._recent[i]
            if err != str(error.errno):
                continue
            if syscalls is not None:
                matches = syscall in syscalls
            elif not names:
                matches = True
            else:
                matches = any(n == path or path.endswith("/" + os.path.basename(n.rstrip("/")))
                              for n in names)
            if matches:
                del self._recent[i]
                message = (f"Permission denied by policy {policy!r} "
                           f"(rule {rule}: {syscall} {path})")
                return PermissionError(error.errno, message, error.filename, None,
                                       getattr(error, "filename2", None))
        return None

    def wrap(self, fn, syscalls=None):
        denials = self

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except PermissionError as e:
                better = denials.explain(e, syscalls)
                if better is None:
                    raise
                raise better from None
        return wrapper

    def install(self):
        """Wraps the functions through which code opens, executes, creates,
        removes, renames and links files, and connects, binds and sends to
        addresses."""
        builtins.open = self.wrap(builtins.open)
        io.open = builtins.open
        for name in ("open", "execv", "execve", "execvp", "execvpe", "execl", "execle",
                     "execlp", "execlpe", "listdir", "scandir", "mkdir", "makedirs",
                     "unlink", "remove", "rmdir", "removedirs", "rename", "renames",
                     "replace", "link", "symlink", "truncate", "mknod", "mkfifo"):
            fn = getattr(os, name, None)
            if fn is None:
                continue
            wrapped = self.wrap(fn)
            setattr(os, name, wrapped)
            # shutil and others test these sets by identity (rmtree chooses
            # its symlink-safe variant when os.unlink supports dir_fd).
            for support in ("supports_dir_fd", "supports_fd", "supports_follow_symlinks",
                            "supports_effective_ids"):
                group = getattr(os, support, None)
                if isinstance(group, set) and fn in group:
                    group.add(wrapped)
        for name, syscalls in self._SOCKET_CALLS.items():
            fn = getattr(socket.socket, name, None)
            if fn is not None:
                setattr(socket.socket, name, self.wrap(fn, syscalls))
        self._keep_unix_names()

    @staticmethod
    def _keep_unix_names():
        """The supervisor binds a pathname socket relative to the directory
        it checked, so the kernel records the name without its directory
        (docs/security.md). getsockname() answers the path the code bound,
        as it would without the supervisor: multiprocessing, for one, hands
        that address to the processes that connect."""
        import weakref  # installed after READY, with the serving modules

        bound = weakref.WeakKeyDictionary()
        plain_bind = socket.socket.bind
        plain_name = socket.socket.getsockname

        def bind(sock, address):
            plain_bind(sock, address)
            if sock.family == socket.AF_UNIX and isinstance(address, (str, bytes, os.PathLike)):
                path = os.fsdecode(address)
                if path and path[0] != "\0":
                    bound[sock] = path

        def getsockname(sock):
            name = plain_name(sock)
            path = bound.get(sock)
            if (path is not None and isinstance(name, str) and "/" in path
                    and name == os.path.basename(path)):
                return path
            return name

        bind.__wrapped__ = plain_bind
        getsockname.__wrapped__ = plain_name
        socket.socket.bind = bind
        socket.socket.getsockname = getsockname


def _parse_args(argv):
    values = {"--segment-fd": None, "--to-worker-fd": None, "--to-supervisor-fd": None,
              "--mode": "reuse", "--control-fd": None}
    i = 0
    while i < len(argv):
        arg = argv[i]
        if "=" in arg and arg.startswith("--"):
            arg, value = arg.split("=", 1)
        elif i + 1 < len(argv):
            i += 1
            value = argv[i]
        else:
            raise ValueError(f"{arg} needs a value")
        if arg not in values:
            raise ValueError(f"unknown argument {arg!r}")
        values[arg] = value
        i += 1
    fds = []
    for name in ("--segment-fd", "--to-worker-fd", "--to-supervisor-fd"):
        if values[name] is None:
            raise ValueError(f"{name} is required")
        if not values[name].isdigit():
            raise ValueError(f"{name}: {values[name]!r} is not a file descriptor number")
        fds.append(int(values[name]))
    if values["--mode"] not in ("reuse", "fork", "oneshot"):
        raise ValueError(f"--mode: {values['--mode']!r} is not one of reuse, fork, oneshot")
    control = values["--control-fd"]
    if control is not None and not control.isdigit():
        raise ValueError(f"--control-fd: {control!r} is not a file descriptor number")
    return fds[0], fds[1], fds[2], values["--mode"], None if control is None else int(control)


# What castellan-worker applied to this process before exec (Landlock,
# seccomp, capabilities, the root): a JSON object in CASTELLAN_ENFORCEMENT,
# removed from the environment before any user code runs and reported in READY
# as it is.
_ENFORCEMENT = None


def _take_enforcement():
    global _ENFORCEMENT
    _ENFORCEMENT = os.environ.pop("CASTELLAN_ENFORCEMENT", None)


def main(argv):
    _take_enforcement()
    try:
        segment_fd, to_worker_fd, to_supervisor_fd, mode, control_fd = _parse_args(argv)
    except ValueError as e:
        sys.stderr.write(f"castellan-harness: {e}\n")
        return EXIT_USAGE
    try:
        harness = Harness(segment_fd, to_worker_fd, to_supervisor_fd, mode, control_fd)
    except (wire.WireError, OSError) as e:
        sys.stderr.write(f"castellan-harness: cannot attach the wire: {e}\n")
        return EXIT_BROKEN_WIRE
    harness.serve()
    return 0
