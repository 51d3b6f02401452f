"""castellan_fork_mode: the harness's side of fork mode.

In `fork` mode each CODE (and COMMAND) runs in a child forked from a
pre-imported zygote (castellan_zygote), which reports its outcome on a
private pipe and exits, so nothing the code did (modules imported, globals,
open files, threads, signal handlers, memory) survives into the next exec.
The zygote is a process of its own, forked from the harness before READY.
The harness itself never forks again: after a fork every page the forking
process writes costs a fault, and the harness's wire work would pay that on
every exec. Only the harness touches the wire (the zygote drops the
segment's mapping and every fd of it); a child's output reaches it through
the fd 1/2 pipes, which it drains while it waits for the zygote's answer.

This module has the harness's side and the formats of the pipes between
harness, zygote and child.
"""

import os
import select
import struct

import castellan_plumbing as plumbing
from castellan_plumbing import _import_own
from castellan_runtime import EXIT_ZYGOTE_LOST

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
json = None
plumbing.late_bound(globals())


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
#: it, of the TIGHTEN payload and of the SETUP payload (0: none) that follow,
#: in that order.
_CODE_HEADER = struct.Struct("<IIII")
_RUN_CODE, _RUN_COMMAND = range(2)

#: The zygote to the harness, per exec: the child's pid (0: none was forked;
#: -1: fork failed, and the status is the errno), its wait status, the
#: length of its report, what became of a tightening (one of the _TIGHTENED
#: values), the length of its text, the length of the reason the worker
#: must retire (0: it need not) and the length of the files it read back;
#: then the report, the text, the reason and the files (per file a FILE
#: frame's header, then the file's bytes when it has content;
#: castellan_files).
_ANSWER_HEADER = struct.Struct("<iiIIIII")
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


class ForkMode:
    """HarnessCore's CODE and COMMAND handlers in fork mode."""

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
                # This process becomes the zygote: its own part is imported
                # here, after the fork, so that the harness never loads it
                # and its READY does not wait for it.
                zygote = _import_own("castellan_zygote").Zygote
                self.__class__ = type("Zygote", (zygote, type(self)), {})
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

    def run_command_forked(self, request_id, payload, setup=None):
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
        self.run_code_forked(request_id, payload, None, _RUN_COMMAND, setup)

    def run_code_forked(self, request_id, source, tightening=None, kind=_RUN_CODE, setup=None):
        """The harness's side of a fork-mode CODE: the code (and the raw
        TIGHTEN and SETUP payloads, both checked by the harness) to the
        zygote, the child's fd 1/2 output to the wire while it runs, then
        RESULT from the zygote's answer."""
        self.request_id = request_id
        zygote_pidfd, ctl_w, answer_r = self.zygote
        poller = self.fork_poller
        pumps = self.pump_by_fd
        # Bytes written after the last RESULT belong to no exec.
        for fd, _ in poller.poll(0):
            if fd in pumps:
                pumps[fd].forward(send=False)
        narrowing = b"" if tightening is None else tightening
        setup = b"" if setup is None else setup
        try:
            # No concatenation: a joined copy of the code would stay behind
            # in this process's heap (the frame's own buffer is scrubbed).
            _writev_all(ctl_w, [_CODE_HEADER.pack(kind, len(source), len(narrowing), len(setup)),
                                source, narrowing, setup])
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
                        _, _, report_size, _, text_size, retire_size, files_size = \
                            _ANSWER_HEADER.unpack_from(answer)
                        need = (_ANSWER_HEADER.size + report_size + text_size + retire_size
                                + files_size)
                elif fd == zygote_pidfd:
                    self._zygote_lost()
                else:
                    pumps[fd].forward()
        # The child has been reaped: all it wrote to fd 1/2 is in the pipes
        # (and what a process it forked wrote before that).
        for fd, _ in poller.poll(0):
            if fd in pumps:
                pumps[fd].forward()
        child, status, report_size, narrowed, text_size, retire_size, files_size = \
            _ANSWER_HEADER.unpack_from(answer)
        start = _ANSWER_HEADER.size
        report = answer[start:start + report_size]
        start += report_size
        text = bytes(answer[start:start + text_size]).decode("utf-8", "replace")
        start += text_size
        if retire_size:
            # Whatever this exec's result, no later one may run here.
            self.retired = bytes(answer[start:start + retire_size]).decode("utf-8", "replace")
        start += retire_size
        if files_size:
            self._send_file_records(request_id, memoryview(answer)[start:start + files_size])
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
