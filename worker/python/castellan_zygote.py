"""castellan_zygote: the fork-mode zygote and the exec's process.

The zygote is forked from the harness before READY; it does the start-up
steps the children need (and the preload), then only forks, waits and
reaps: per code received from the harness, a child that enters its own
Landlock domain (_ExecDomain), applies the request's tightening if any,
runs the code or execs the COMMAND's program, and reports on a pipe of its
own. After each exec the zygote puts back what it left (castellan_clean)
or says the worker must retire.
"""

import builtins
import os
import select
import sys
import types

import _signal as signal  # the C module: `signal` itself imports enum (~2.5 ms)

import castellan_plumbing as plumbing
from castellan_fork_mode import (_ANSWER_HEADER, _CODE_HEADER, _EXEC_FAILURE, _NOT_TIGHTENED,
                                 _PR_SET_CHILD_SUBREAPER, _REPORT_MAX, _RUN_COMMAND,
                                 _TIGHTEN_REFUSED, _TIGHTENED, _WALL, _pack_report,
                                 _readinto_exact, _writev_all)
from castellan_plumbing import (_exec_failure_status, _freeze_shared_objects, _import_clean,
                                _import_own, _import_serving_modules, _import_tighten)
from castellan_runtime import (_PR_SET_DUMPABLE, EXIT_BROKEN_WIRE, EXIT_NOT_RUN,
                               _make_undumpable)

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
ctypes = json = linecache = tighten = None
plumbing.late_bound(globals())

#: The zygote cannot create the exec's Landlock ruleset.
EXIT_NO_EXEC_DOMAIN = 6


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


class Zygote:
    """The zygote's and the exec's process's part of HarnessCore in fork
    mode (they are forks of the harness, with its state: the zygote takes
    this class on right after its fork, ForkMode._start_zygote)."""

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
        self._install_exec_stdio()
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
        """The next code, TIGHTEN and SETUP payloads from the harness (see
        _CODE_HEADER) as views of the zygote's code buffer, None at EOF.
        Read straight into that buffer, which _run_child zeroes once the
        exec is over: no other copy of the code is made in the zygote, whose
        memory every later child starts from."""
        header = self._code_header
        if not _readinto_exact(ctl_r, memoryview(header)):
            return None
        kind, code_size, narrowing_size, setup_size = _CODE_HEADER.unpack_from(header)
        need = code_size + narrowing_size + setup_size
        if len(self._code_buffer) < need:
            # A new, larger buffer (zeroed by the allocator); the old one was
            # zeroed after its last use.
            self._code_buffer = bytearray(max(need, 2 * len(self._code_buffer)))
        view = memoryview(self._code_buffer)[:need]
        if not _readinto_exact(ctl_r, view):
            return None
        setup_start = code_size + narrowing_size
        return kind, view[:code_size], view[code_size:setup_start], view[setup_start:]

    def _run_child(self, ctl_r, answer_w, kind, source, narrowing, setup):
        """One exec in the zygote: forks the child, waits for it only (a
        process it forked may outlive it, and makes the pool replace the
        worker), answers with its report. Kept to the bare calls: every page
        the zygote writes while the child lives is copied on a fault."""
        prepared = None
        # Parsed in the child only: the request's environment and stdin must
        # not land in the zygote's heap, where the next child would find
        # them; the zygote only imports the module.
        setup_module = _import_own("castellan_setup") if setup else None
        if self._unclean is not None:
            # What an earlier exec left could not be put back: no code runs
            # here any more (the harness stops sending any; this is the
            # second lock).
            self._scrub_code(source, narrowing, setup)
            self._answer(answer_w, 0, 0, b"", _NOT_TIGHTENED, "", self._unclean)
            return
        if narrowing:
            # Built here, not in the child: every page the child touches is
            # copied, the zygote's are its own.
            t = _import_tighten()
            try:
                prepared = t.prepare(t.parse(narrowing))
            except t.TighteningError as e:
                self._scrub_code(source, narrowing, setup)
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
            self._scrub_code(source, narrowing, setup)
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
                if setup_module is not None:
                    self._child_setup(setup_module, setup)  # exits if it cannot run
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
        # The files the request asked back, read before the clean-up empties
        # /tmp; then its files_in are removed (outside /tmp nothing else
        # would).
        files = self._read_files(setup_module, setup) if setup_module is not None else []
        # Zeroed once the child is gone (its pages are the zygote's alone
        # again, so this copies nothing): the next child must not find them.
        self._scrub_code(source, narrowing, setup)
        del source, narrowing, setup
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
            self._answer(answer_w, pid, status, report, narrowed, text, self._unclean, files)
        finally:
            report[:] = bytes(len(report))
            for part in files:
                if isinstance(part, bytearray):
                    part[:] = bytes(len(part))

    @staticmethod
    def _read_files(setup_module, payload):
        """The request's files_out as the records of the answer (a FILE
        frame's header, then the file's bytes; see castellan_files), and its
        files_in removed. Read by the zygote, which runs no user code, after
        the exec's process is gone: the code cannot lie about them, only
        leave what it likes at their paths, which are walked without
        following a symlink and read only when they are regular files."""
        files = setup_module.files_module()
        try:
            files_in, files_out = setup_module.parse_files(payload)
        except setup_module.SetupError:
            return []  # the harness checked it: cannot happen
        parts = []
        for index, status, size, data in files.read_files(files_out):
            parts.append(files.FRAME_HEADER.pack(index, status, size))
            if len(data):
                parts.append(data)
        for path, _, content in files_in:
            content.release()
            files.remove_file(path)
        return parts

    def _scrub_code(self, source, narrowing, setup):
        """Zeroes the code buffer where this exec's code, TIGHTEN and SETUP
        were."""
        n = len(source) + len(narrowing) + len(setup)
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
    def _answer(answer_w, pid, status, report, narrowed, text, retire=None, files=()):
        data = text.encode("utf-8", "backslashreplace")
        reason = b"" if retire is None else retire.encode("utf-8", "backslashreplace")
        files_size = sum(len(part) for part in files)
        _writev_all(answer_w, [_ANSWER_HEADER.pack(pid, status, len(report), narrowed, len(data),
                                                   len(reason), files_size),
                               report, data, reason, *files])

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

    @staticmethod
    def _child_setup(setup_module, payload):
        """The exec's process: its environment, working directory and stdin
        (the harness checked the payload); exits with EXIT_NO_CWD, having
        said why on fd 2, when the directory cannot be entered."""
        failed = setup_module.apply(setup_module.parse(payload), os.environ)
        if failed is not None:
            os.write(2, failed.encode("utf-8", "backslashreplace"))
            os._exit(setup_module.EXIT_NO_CWD)

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
