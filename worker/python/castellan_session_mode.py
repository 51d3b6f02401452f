"""castellan_session_mode: CODE in session mode, run by the harness itself
in one __main__ for the worker's life.

A session's worker serves one client (docs/sessions.md): what one exec
defines, the next one uses. The harness runs each CODE as reuse mode does
(castellan_shared_mode), but in the same module every time, and its
_prepare leaves the environment's contents, the working directory and
sys.path as the last request left them (HarnessCore.keeps_state). It still
puts back, before every request, what the harness itself needs: stdio
writers, fd 0 on /dev/null, fd 1/2 on the pumps, the SIGINT handler, the
trace and profile hooks, the warning filters and the recursion limit.
"""

import builtins
import io
import types

import castellan_whole_file_writes
from castellan_shared_mode import SharedMode


class SessionMode(SharedMode):
    """HarnessCore's CODE handler in session mode."""

    keeps_state = True
    _session_main = None

    def _main_module(self):
        """The session's __main__, made by its first CODE."""
        if self._session_main is None:
            # Files of /workspace written whole or not at all, should an
            # exec be killed while it writes one (castellan_whole_file_writes).
            castellan_whole_file_writes.install(io, builtins)
            main = types.ModuleType("__main__")
            main.__dict__["__builtins__"] = builtins
            self._session_main = main
        return self._session_main
