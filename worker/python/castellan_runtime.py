"""castellan_runtime: the body of the Python harness (castellan_harness.py
is its entry point; see there for how it is started, and castellan-launcher,
worker/warm_interpreter.cpp, for the warm start through warm_up and main).

It attaches the wire, sends READY, then serves CODE / COMMAND / SHUTDOWN
frames from the supervisor (docs/wire.md). User code runs in a fresh __main__
module each time; its stdout and stderr (Python-level and fd-level) come back
as STDOUT/STDERR frames, then one RESULT frame.

Start-up is split in two so that a new worker is READY about as soon as the
interpreter itself (castellan_plumbing). In `fork` mode each CODE and COMMAND
runs in a child forked from a pre-imported zygote, so nothing the code did
survives into the next exec (castellan_fork_mode); in `reuse` mode the
harness runs them itself; in `session` mode too, but in one __main__ for the
worker's life, with the environment and working directory the last request
left (castellan_session_mode): a session's state, on purpose.

Exit codes: 0 after SHUTDOWN (or after the request in oneshot mode), 2 for a
bad command line, 3 for a broken wire, 4 when the fork-mode zygote is gone,
5 when the harness (or the zygote) cannot make itself non-dumpable, 6 when
the fork-mode zygote cannot create the exec's Landlock ruleset.
Nothing user code does is meant to end the harness except through the
process itself (os._exit, signals) or, in fork mode, its zygote.

This module is the harness's core, whatever the mode (HarnessCore: the
wire, READY, the loop that hands each frame to its mode, the signals, the
per-request process state, RESULT), and its entry (main, warm_up). Each
mode's handlers are a module of their own, mixed into HarnessCore by main()
for the mode it is started in (harness_class):

- castellan_shared_mode, castellan_command_mode: CODE in the harness itself
  and COMMAND as its subprocess (reuse and oneshot modes);
- castellan_session_mode (with castellan_command_mode): session mode, and
  castellan_whole_file_writes, its whole-file writes below /workspace;
- castellan_fork_mode, castellan_zygote: fork mode, the harness's side and
  the zygote's and exec's process's side (imported by the zygote, after
  the fork: the harness never runs it).

They share castellan_plumbing (staged imports, stdout/stderr as frames,
outcomes) and castellan_wire (the rings); castellan_denials (PermissionErrors
that name the policy rule), castellan_tighten and castellan_clean are
imported when first needed. A worker imports only its own mode's modules,
from the harness's directory (_import_own), before READY; castellan-launcher
imports all of them once (warm_up), as a warm-started worker's directory is
the launcher's, on the host, which its sandbox does not have.
"""


import os
import sys

import castellan_wire as wire

import _signal as signal  # the C module: `signal` itself imports enum (~2.5 ms)
import _thread
import io
import time
import warnings

import castellan_plumbing as plumbing
from castellan_plumbing import (HARNESS_FILES, PRELOAD, _describe_exception,
                                _freeze_shared_objects, _FrameRaw, _import_clean, _import_own,
                                _import_serving_modules, _import_tighten, _light_site,
                                _preloader, _Pump, _system_exit_code)

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
ctypes = json = tighten = None
plumbing.late_bound(globals())

# Exit codes (this module's doc lists them all; the zygote's own is
# castellan_zygote's).
EXIT_USAGE = 2
EXIT_BROKEN_WIRE = 3
#: The harness, when its zygote is gone.
EXIT_ZYGOTE_LOST = 4
#: The harness or the zygote, when it cannot make itself non-dumpable.
EXIT_DUMPABLE = 5
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


# Harness states (what the main thread is doing).
STARTING, IDLE, USER, COMMAND, FINISHING = range(5)


class _Terminate(BaseException):
    """Raised in the idle main loop by SIGINT: stop, dying of that signal."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


_original_showwarning = warnings.showwarning


def _inside_harness_code(frame):
    """True if `frame`, or a caller below the exec() of user code, is the
    harness's own code (the wire, a stdio writer, the signal handler)."""
    while frame is not None:
        code = frame.f_code
        if code is HarnessCore._execute.__code__:
            return False  # reached the exec() boundary: user code was running
        if code.co_filename in HARNESS_FILES:
            return True
        frame = frame.f_back
    return False


# What castellan-worker applied to this process before exec (Landlock,
# seccomp, capabilities, the root): a JSON object in CASTELLAN_ENFORCEMENT,
# removed from the environment before any user code runs and reported in READY
# as it is.
_ENFORCEMENT = None


def _take_enforcement():
    global _ENFORCEMENT
    _ENFORCEMENT = os.environ.pop("CASTELLAN_ENFORCEMENT", None)


class HarnessCore:
    """The harness's core, whatever the mode: the wire, the fd 1/2 pumps,
    the signals, the start-up steps, the process state restored before each
    request, RESULT frames, and the loop that dispatches each frame to the
    mode's handler (castellan_shared_mode, castellan_command_mode,
    castellan_fork_mode)."""

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
        # (request id, payload) of a SETUP frame, until the CODE or COMMAND
        # frame it announces arrives.
        self.pending_setup = None
        # /dev/null, kept open above the low fds: what _prepare puts back
        # on fd 0 before every request.
        self.devnull_fd = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
        moved = os.dup(self.devnull_fd) if self.devnull_fd < 3 else None
        if moved is not None:
            os.close(self.devnull_fd)
            self.devnull_fd = moved
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
        self.environb_obj = os.environb
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
            _import_own("castellan_denials").PolicyDenials(self.control_fd).install()
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

    def _install_exec_stdio(self):
        """What an exec's code sees as its process's stdio: stdout and stderr
        that write frames (undecodable text kept as surrogates on stdout,
        escaped on stderr), an empty stdin, and argv of its own."""
        self.out = self._make_writer(wire.STDOUT, 1, "surrogateescape")
        self.err = self._make_writer(wire.STDERR, 2, "backslashreplace")
        sys.stdout = sys.__stdout__ = self.out
        sys.stderr = sys.__stderr__ = self.err
        sys.stdin = sys.__stdin__ = io.TextIOWrapper(io.BytesIO(b""), encoding="utf-8")
        sys.argv = ["<exec>"]

    #: Session mode keeps the environment, the working directory and
    #: sys.path from request to request (castellan_session_mode).
    keeps_state = False

    def _prepare(self, request_id):
        """A clean process state for the next request: fresh stdio writers,
        fd 1/2 on the pumps, and what user code may have changed restored
        (in session mode, all but the environment's contents, the working
        directory and sys.path, which are the session's state)."""
        self.request_id = request_id
        for pump in self.pumps:
            try:
                pump.restore()
            except OSError as e:
                self.diag(f"cannot restore fd {pump.target_fd}: {e.strerror}")
        self._install_exec_stdio()
        # fd 0 back on /dev/null whatever the last request left there: its
        # stdin, or what its code put on fd 0 (one dup2, no open).
        try:
            os.dup2(self.devnull_fd, 0)
        except OSError as e:
            self.diag(f"cannot put /dev/null back on fd 0: {e.strerror}")
        if not self.keeps_state:
            sys.path[:] = self.saved_path
        sys.settrace(None)
        sys.setprofile(None)
        sys.setrecursionlimit(self.saved_recursion_limit)
        warnings.filters[:] = self.saved_warning_filters
        if hasattr(warnings, "_filters_mutated"):
            warnings._filters_mutated()  # drops the caches of the old filters
        warnings.showwarning = _original_showwarning
        self._pending_interrupt = False
        if os.environ is not self.environ_obj or os.environb is not self.environb_obj:
            # The objects the harness applies requests' variables to, in
            # every mode (a session keeps their contents, not a stand-in).
            os.environ = self.environ_obj
            os.environb = self.environb_obj
            if not self.keeps_state:
                os.environ.clear()
                os.environ.update(self.saved_environ)
        elif not self.keeps_state and self.environ_obj._data != self.saved_environ_data:
            os.environ.clear()
            os.environ.update(self.saved_environ)
        if self.saved_cwd is not None and not self.keeps_state:
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

    def _send_file(self, request_id, index, status, size, data):
        """One file of the request's files_out as FILE frames: the header
        (index, status, size) on each, the bytes in pieces that fit a frame."""
        files = _import_own("castellan_setup").files_module()
        header = files.FRAME_HEADER.pack(index, status, size)
        if status != files.CONTENT or not size:
            self.wire.send(wire.FILE, request_id, header)
            return
        chunk = self.wire.chunk - files.FRAME_HEADER.size
        view = memoryview(data)
        for start in range(0, size, chunk):
            self.wire.send(wire.FILE, request_id, header + view[start:start + chunk])

    def _send_file_records(self, request_id, records):
        """The files the zygote read back (fork mode): per file a FILE
        frame's header, then its bytes when it has content."""
        files = _import_own("castellan_setup").files_module()
        header = files.FRAME_HEADER
        start = 0
        while start < len(records):
            if start + header.size > len(records):
                self.wire.broken("the zygote's file records are cut short")
            index, status, size = header.unpack_from(records, start)
            start += header.size
            data = b""
            if status == files.CONTENT:
                if start + size > len(records):
                    self.wire.broken("the zygote's file records are cut short")
                data = records[start:start + size]
                start += size
            self._send_file(request_id, index, status, size, data)

    def _finish_files(self, request_id, setup):
        """Shared and command modes, once the exec has ended: the files it
        asked back as FILE frames, then its files_in removed, so that the
        next exec on this process does not find them."""
        if setup is None or not (setup.files_in or setup.files_out):
            return
        files = _import_own("castellan_setup").files_module()
        for record in files.read_files(setup.files_out):
            self._send_file(request_id, *record)
        self._remove_files_in(setup)

    @staticmethod
    def _remove_files_in(setup):
        if setup is None:
            return
        files = _import_own("castellan_setup").files_module()
        for path, _, _ in setup.files_in:
            files.remove_file(path)

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

    def _take_setup(self, request_id):
        """The SETUP frame announced for `request_id`, parsed (None without
        one); the frame must come right before its CODE or COMMAND."""
        pending, self.pending_setup = self.pending_setup, None
        if pending is None:
            return None
        if pending[0] != request_id:
            self.wire.broken(f"SETUP for request {pending[0]} followed by request {request_id}")
        setup_module = _import_own("castellan_setup")
        try:
            return setup_module.parse(pending[1])
        except setup_module.SetupError as e:
            self.wire.broken(str(e))

    def _apply_setup(self, request_id, setup):
        """Applies `setup` (shared and command modes: in the harness's own
        process, which _prepare puts back before the next request); False,
        with the request answered, when it cannot run."""
        if setup is None:
            return True
        failed = _import_own("castellan_setup").apply(setup, self.environ_obj)
        if failed is None:
            return True
        # What it wrote before it failed goes with it.
        self._remove_files_in(setup)
        self._send_stderr(failed)
        self.send_result(request_id, _import_own("castellan_setup").EXIT_NO_CWD, None)
        return False

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
            if mtype == wire.SETUP:
                if self.pending_setup is not None:
                    self.wire.broken("two SETUP frames without a CODE or COMMAND between them")
                self.pending_setup = (request_id, payload)
                continue
            setup_payload = self.pending_setup[1] if self.pending_setup is not None else None
            setup = self._take_setup(request_id) \
                if mtype in (wire.CODE, wire.COMMAND) else None
            if mtype in (wire.CODE, wire.COMMAND):
                self.wire.stream_output = setup is not None and setup.stream
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
                                     narrowing if tightening is not None else None,
                                     setup=setup_payload if setup is not None else None)
            elif mtype == wire.CODE:
                self.run_code(request_id, payload, setup)
            elif mtype == wire.COMMAND and self.mode == "fork":
                self.run_command_forked(request_id, payload,
                                        setup_payload if setup is not None else None)
            elif mtype == wire.COMMAND:
                self.run_command(request_id, payload, setup)
            elif mtype == wire.SHUTDOWN:
                os._exit(0)
            else:
                self.wire.broken(f"unexpected frame type {mtype:#04x} with no check pending")
            if mtype == wire.CODE:
                wire.scrub(payload)
            if setup is not None:
                # The request's stdin and environment, like its code.
                setup = None
                wire.scrub(setup_payload)
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


#: Each mode's modules, and the class in each that HarnessCore takes its
#: handlers from (oneshot is reuse for one request; fork mode's zygote adds
#: castellan_zygote's, ForkMode._start_zygote).
_MODE_MODULES = {"reuse": ("castellan_shared_mode", "castellan_command_mode"),
                 "fork": ("castellan_fork_mode",),
                 "session": ("castellan_session_mode", "castellan_command_mode")}
_MODE_CLASSES = {"castellan_shared_mode": "SharedMode", "castellan_command_mode": "CommandMode",
                 "castellan_fork_mode": "ForkMode", "castellan_session_mode": "SessionMode"}


def harness_class(mode):
    """HarnessCore with the handlers of `mode` (imported now if they are
    not yet)."""
    names = _MODE_MODULES["reuse" if mode == "oneshot" else mode]
    mixins = tuple(getattr(_import_own(name), _MODE_CLASSES[name]) for name in names)
    return type("Harness", mixins + (HarnessCore,),
                {"__doc__": "The harness of one worker in " + mode + " mode."})


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
    for name in _MODE_MODULES["reuse"] + _MODE_MODULES["fork"] + ("castellan_session_mode",
                                                                  "castellan_zygote",
                                                                  "castellan_denials"):
        _import_own(name)
    _import_own("castellan_setup")
    _import_tighten()
    _import_clean()
    _freeze_shared_objects()
    if "threading" in sys.modules:
        raise RuntimeError("warm_up: threading was imported; its after-fork hook would "
                           "slow every worker's start")


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
    if values["--mode"] not in ("reuse", "fork", "oneshot", "session"):
        raise ValueError(f"--mode: {values['--mode']!r} is not one of reuse, fork, oneshot, "
                         "session")
    control = values["--control-fd"]
    if control is not None and not control.isdigit():
        raise ValueError(f"--control-fd: {control!r} is not a file descriptor number")
    return fds[0], fds[1], fds[2], values["--mode"], None if control is None else int(control)


def main(argv):
    _take_enforcement()
    try:
        segment_fd, to_worker_fd, to_supervisor_fd, mode, control_fd = _parse_args(argv)
    except ValueError as e:
        sys.stderr.write(f"castellan-harness: {e}\n")
        return EXIT_USAGE
    try:
        harness = harness_class(mode)(segment_fd, to_worker_fd, to_supervisor_fd, mode,
                                      control_fd)
    except (wire.WireError, OSError) as e:
        sys.stderr.write(f"castellan-harness: cannot attach the wire: {e}\n")
        return EXIT_BROKEN_WIRE
    harness.serve()
    return 0
