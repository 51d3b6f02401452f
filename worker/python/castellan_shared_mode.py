"""castellan_shared_mode: CODE run by the harness itself (reuse and
oneshot modes).

User code runs in a fresh __main__ module each time, in the harness's own
interpreter, which keeps what earlier code imported: the fastest mode, for
one trust domain. The harness restores what code may change between
requests (HarnessCore._prepare) and catches what it raises.
"""

import builtins
import os
import sys
import types

import castellan_plumbing as plumbing
from castellan_runtime import FINISHING

# What serving a request needs, imported after READY: bound by
# castellan_plumbing (late_bound) once imported.
linecache = None
plumbing.late_bound(globals())


class SharedMode:
    """HarnessCore's CODE handler in reuse and oneshot mode."""

    def _main_module(self):
        """The __main__ the next CODE runs in: a fresh one each time."""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        return main

    def run_code(self, request_id, source, setup=None):
        self._prepare(request_id)
        if not self._apply_setup(request_id, setup):
            return
        main = self._main_module()
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
        self._finish_files(request_id, setup)
        self.send_result(request_id, exit_code, exception)
