"""castellan_command_mode: COMMAND run as a subprocess of the harness
(reuse and oneshot modes).

The program (argv from the COMMAND frame, looked up on PATH) runs with its
stdout and stderr streamed as frames until both pipes close. When the
harness cannot start it, the RESULT says so in `exec_error` (docs/wire.md).
Fork mode starts programs in a child of the zygote instead
(castellan_zygote), with the same words and statuses.
"""

import os
import select

import castellan_wire as wire

import castellan_plumbing as plumbing
from castellan_plumbing import _exec_failure_status
from castellan_runtime import COMMAND, FINISHING

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
subprocess = None
plumbing.late_bound(globals())


class CommandMode:
    """HarnessCore's COMMAND handler in reuse and oneshot mode."""

    def run_command(self, request_id, payload, setup=None):
        if not payload.endswith(b"\0"):
            self.wire.broken("COMMAND payload does not end with a NUL byte")
        argv = payload[:-1].split(b"\0")
        self._prepare(request_id)
        if not self._apply_setup(request_id, setup):
            return
        program = argv[0].decode("utf-8", "backslashreplace")
        if not argv[0]:
            self._remove_files_in(setup)
            self._send_stderr("castellan: empty program name\n")
            self.send_result(request_id, 127, None)
            return
        try:
            # The request's stdin is on fd 0 (castellan_setup); else none.
            stdin = None if setup is not None and setup.stdin is not None \
                else subprocess.DEVNULL
            self.child = subprocess.Popen(argv, stdin=stdin,
                                          stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                          close_fds=True, bufsize=0)
        except OSError as e:
            # subprocess names the program in the error only when its execve
            # failed (a failed fork or set-up before the exec names none).
            failed_exec = e.filename is not None and bool(e.errno)
            self._remove_files_in(setup)
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
        self._finish_files(request_id, setup)
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
